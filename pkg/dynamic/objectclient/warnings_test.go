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

// A write made under WithWarnings hands the response's warnings to its
// handler, and only that write: the warnings of two concurrent writes are
// not mixed up.
func TestWithWarningsAttributesWarningsToTheWrite(t *testing.T) {
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
		do   func(ctx context.Context) error
		want string
	}
	writes := []write{
		{"create", func(ctx context.Context) error {
			_, err := c.Create(ctx, configMapsGVR, "ns", []byte(`{}`))
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps"`},
		{"update", func(ctx context.Context) error {
			_, err := c.Update(ctx, configMapsGVR, "ns", "a", []byte(`{}`))
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps/a"`},
		{"patch", func(ctx context.Context) error {
			_, err := c.Patch(ctx, configMapsGVR, "ns", "b", "application/merge-patch+json", []byte(`{}`))
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps/b"`},
		{"delete", func(ctx context.Context) error {
			_, err := c.Delete(ctx, configMapsGVR, "ns", "c", metav1.DeleteOptions{})
			return err
		}, `unknown field "/api/v1/namespaces/ns/configmaps/c"`},
	}
	got := make([][]string, len(writes))
	done := make(chan error)
	for i, w := range writes {
		go func() {
			ctx := WithWarnings(context.Background(), func(text string) { got[i] = append(got[i], text) })
			done <- w.do(ctx)
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
