/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

var benchChild = hookfixture.BenchChild

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
