/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// benchChild is a ConfigMap of typical size.
func benchChild(i int) *unstructured.Unstructured {
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

// benchRequest is a sync request with ten observed children.
func benchRequest() *hooks.CompositeSyncRequest {
	parent := benchChild(0)
	parent.SetAPIVersion("ctl.example.com/v1")
	parent.SetKind("Thing")
	parent.SetName("demo")
	children := hooks.NewObjectMap()
	children.EnsureKey("v1", "Secret")
	for i := range 10 {
		children.Insert(v1alpha1.HookVersionV1, true, benchChild(i))
	}
	return &hooks.CompositeSyncRequest{Controller: sampleController(), Parent: parent, Children: children, Related: hooks.NewObjectMap()}
}

// benchResponse is a sync response with ten desired children.
func benchResponse(b *testing.B) []byte {
	resp := hooks.CompositeSyncResponse{Status: map[string]any{"replicas": int64(10), "ready": true}}
	for i := range 10 {
		c := benchChild(i)
		unstructured.RemoveNestedField(c.Object, "metadata", "uid")
		unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(c.Object, "metadata", "ownerReferences")
		resp.Children = append(resp.Children, c)
	}
	body, err := json.Marshal(&resp)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func BenchmarkCallSync(b *testing.B) {
	respBody := benchResponse(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(respBody)
	}))
	defer srv.Close()
	c := NewClient(Options{})
	hook := urlHook(srv.URL + "/sync")
	req := benchRequest()
	ctx := context.Background()

	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var resp hooks.CompositeSyncResponse
			if err := c.Call(ctx, "bench", "sync", hook, req, &resp, CallOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				var resp hooks.CompositeSyncResponse
				if err := c.Call(ctx, "bench", "sync", hook, req, &resp, CallOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
