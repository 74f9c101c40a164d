/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// The fixtures below are those of pkg/hooks/hookclient's tests that the
// tests of credentials use too.

func urlHook(url string) *v1alpha1.Hook {
	return &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(url)}}
}

// serve starts a hook server answering with handler.
func serve(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// answer returns a handler that replies 200 with body.
func answer(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func sampleCompositeRequest(version v1alpha1.HookVersion) *hooks.CompositeSyncRequest {
	parent := newObject("ctl.example.com/v1", "Thing", "ns", "p")
	parent.Object["spec"] = map[string]any{"replicas": int64(2)}
	children := hooks.NewObjectMap()
	children.EnsureKey("v1", "ConfigMap")
	children.EnsureKey("v1", "Pod")
	children.Insert(version, true, newObject("v1", "ConfigMap", "ns", "name-a"))
	related := hooks.NewObjectMap()
	related.Insert(version, true, newObject("ctl.example.com/v1", "Thing", "ns", "other"))
	return &hooks.CompositeSyncRequest{Controller: sampleController(), Parent: parent, Children: children, Related: related}
}

// statusAnswer is a valid composite answer of exactly n bytes (n >= 20).
func statusAnswer(n int) string {
	const head, tail = `{"status":{"x":"`, `"}}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

func newObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

func sampleController() *unstructured.Unstructured {
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
