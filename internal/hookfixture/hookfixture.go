// Package hookfixture holds the fixtures the tests of pkg/hooks,
// pkg/hooks/hookclient and pkg/hooks/credentials share: objects, a
// CompositeController, hooks and hook servers. Only tests import it. It
// imports nothing of metactl but the API types, so that the tests inside
// pkg/hooks may use it too.
package hookfixture

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// URLHook is a hook called at url.
func URLHook(url string) *v1alpha1.Hook {
	return &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(url)}}
}

// Serve starts a hook server answering with handler, closed when t ends.
func Serve(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// Answer returns a handler that reads the request and replies 200 with
// body.
func Answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

// StatusAnswer is a valid composite answer of exactly n bytes (n >= 20).
func StatusAnswer(n int) string {
	const head, tail = `{"status":{"x":"`, `"}}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

// NewObject is an object with only its apiVersion, kind, namespace (none
// when empty) and name.
func NewObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// Controller is a CompositeController of "things" with a sync hook.
func Controller() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": "things"},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": "ctl.example.com/v1", "resource": "things"},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://h/sync"}}},
		},
	}}
}

// BenchChild is a ConfigMap of typical size, the i-th child of a parent.
func BenchChild(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":              fmt.Sprintf("child-%d", i),
			"namespace":         "default",
			"uid":               fmt.Sprintf("0b6f6c3e-5a4f-4d0e-9c1b-00000000%04d", i),
			"resourceVersion":   "123456",
			"creationTimestamp": "2030-01-02T03:04:05Z",
			"labels":            map[string]any{"app": "demo", "controller-uid": "7d1b0f9e-2c8a-4f6e-8a51-3b9c3a1d2e4f"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "ctl.example.com/v1", "kind": "Thing", "name": "demo",
				"uid": "7d1b0f9e-2c8a-4f6e-8a51-3b9c3a1d2e4f", "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"data": map[string]any{"config.yaml": "replicas: 3\nimage: example/app:1.2.3\n", "index": int64(i)},
	}}
}
