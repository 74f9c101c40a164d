package informer

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSizeCoversTheObjectsJSON: Size, counted without decoding, is at or
// above the JSON of the object as a hook request carries it (decoded and
// encoded again), for objects whose size is in their data, their labels
// and annotations, their owners and finalizers, or nowhere in particular;
// and it is not more than twice that JSON for an object of 1 MiB of data
// (nor more than a few KiB for an empty one).
func TestSizeCoversTheObjectsJSON(t *testing.T) {
	annotations := map[string]any{}
	labels := map[string]any{}
	for i := range 200 {
		annotations["example.com/annotation-"+strings.Repeat("k", i%40)+string(rune('a'+i%26))] = strings.Repeat("v", i)
		labels["l"+strings.Repeat("x", i%50)+string(rune('a'+i%26))] = "value"
	}
	var owners []any
	for i := range 5 {
		owners = append(owners, map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Thing", "name": strings.Repeat("n", 200+i),
			"uid": "0f2b9c1e-1111-2222-3333-44445555666" + string(rune('0'+i)), "controller": i == 0, "blockOwnerDeletion": true})
	}
	meta := func(extra map[string]any) map[string]any {
		m := map[string]any{"name": "n", "namespace": "ns", "uid": "0f2b9c1e-1111-2222-3333-444455556666", "resourceVersion": "123456789",
			"generation": 12, "creationTimestamp": "2026-01-02T03:04:05Z"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		max  int64 // most Size may be; 0: not checked
	}{
		{"empty", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(nil)}, 2048},
		{"1 MiB of data", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(nil), "data": map[string]any{"v": strings.Repeat("x", 1<<20)}}, 2 << 20},
		{"labels and annotations", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(map[string]any{"labels": labels, "annotations": annotations})}, 0},
		{"owners and finalizers", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(map[string]any{"ownerReferences": owners,
			"finalizers": []any{strings.Repeat("f", 300), "example.com/" + strings.Repeat("g", 100)}, "deletionTimestamp": "2026-01-02T03:04:05Z",
			"deletionGracePeriodSeconds": 30, "generateName": strings.Repeat("p", 200)})}, 0},
		{"many small keys", map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": meta(nil), "data": labels, "type": "Opaque"}, 0},
	} {
		data, err := json.Marshal(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		o, err := NewObject(data)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		u, err := o.Unstructured()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		sent, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Size(); got < int64(len(sent)) {
			t.Errorf("%s: Size %d, less than the %d bytes of its JSON", tc.name, got, len(sent))
		} else if tc.max > 0 && got > tc.max {
			t.Errorf("%s: Size %d, more than %d (its JSON is %d bytes)", tc.name, got, tc.max, len(sent))
		}
	}
}
