package objectclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// A write given the Warnings option hands the response's warnings to its
// handler, and only that write: the warnings of concurrent writes are not
// mixed up.
func TestWarningsAttributesWarningsToTheWrite(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "unknown field \"`+r.URL.Path+`\""`)
		w.Header().Add("Warning", `199 - "not an API server warning"`)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}`))
	}))
	defer server.Close()
	c, err := New(&rest.Config{Host: server.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}

	type write struct {
		name string
		do   func(opt WriteOption) error
		want string
	}
	writes := []write{
		{"create", func(opt WriteOption) error {
			_, err := c.Create(context.Background(), configMapsGVR, "ns", []byte(`{}`), opt)
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps"`},
		{"update", func(opt WriteOption) error {
			_, err := c.Update(context.Background(), configMapsGVR, "ns", "a", []byte(`{}`), opt)
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps/a"`},
		{"apply", func(opt WriteOption) error {
			_, err := c.Apply(context.Background(), configMapsGVR, "ns", "b", []byte(`{}`), "test", false, opt)
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps/b"`},
		{"delete", func(opt WriteOption) error {
			_, err := c.Delete(context.Background(), configMapsGVR, "ns", "c", metav1.DeleteOptions{}, opt)
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps/c"`},
	}
	got := make([][]string, len(writes))
	done := make(chan error)
	for i, w := range writes {
		go func() {
			done <- w.do(Warnings(func(text string) { got[i] = append(got[i], text) }))
		}()
	}
	for range writes {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range writes {
		if !slices.Equal(got[i], []string{w.want}) {
			t.Errorf("%s: warnings %q, want [%q]", w.name, got[i], w.want)
		}
	}
}
