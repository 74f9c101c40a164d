/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var benchChild = hookfixture.BenchChild

// benchRequest is a sync request with ten observed children.
func benchRequest() *CompositeSyncRequest {
	parent := benchChild(0)
	parent.SetAPIVersion("ctl.example.com/v1")
	parent.SetKind("Thing")
	parent.SetName("demo")
	children := NewObjectMap()
	children.EnsureKey("v1", "Secret")
	for i := range 10 {
		children.Insert(v1alpha1.HookVersionV1, true, benchChild(i))
	}
	return &CompositeSyncRequest{Controller: sampleController(), Parent: parent, Children: children, Related: NewObjectMap()}
}

// benchResponse is a sync response with ten desired children.
func benchResponse(b *testing.B) []byte {
	resp := CompositeSyncResponse{Status: map[string]any{"replicas": int64(10), "ready": true}}
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

// BenchmarkEncodeCompositeRequest compares the request encoding of Call
// with encoding/json on the same request.
func BenchmarkEncodeCompositeRequest(b *testing.B) {
	req := benchRequest()
	b.Run("hooks", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := getEncoder()
			if err := p.request(req); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(p.b.Len()))
			putEncoder(p)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := json.NewEncoder(&buf).Encode(req); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(buf.Len()))
		}
	})
}

func BenchmarkDecodeCompositeResponse(b *testing.B) {
	body := benchResponse(b)
	for _, mode := range []v1alpha1.ResponseUnMarshallMode{v1alpha1.ResponseUnMarshallModeLoose, v1alpha1.ResponseUnMarshallModeStrict} {
		b.Run(string(mode), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var resp CompositeSyncResponse
				if err := resp.DecodeHookResponse(body, mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
