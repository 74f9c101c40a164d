package inmemory

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/dynamic/status"
)

var (
	thingsGVR     = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "things"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// thing is the Thing ns/p with status {"a": 1}.
func thing() *unstructured.Unstructured {
	p := Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
	p.Object["status"] = map[string]any{"a": int64(1)}
	return p
}

// TestObjectsChecksPreconditions: a write whose resourceVersion or UID
// is not the stored object's is a conflict and changes nothing; one that
// holds gets a new resourceVersion.
func TestObjectsChecksPreconditions(t *testing.T) {
	o := NewObjects([]schema.GroupVersionResource{thingsGVR}, thing())
	ctx := t.Context()
	for name, write := range map[string]func() error{
		"update, stale resourceVersion": func() error {
			_, err := o.Update(ctx, thingsGVR, "ns", "p", []byte(`{"apiVersion":"test.metactl.io/v1","kind":"Thing","metadata":{"name":"p","resourceVersion":"0"}}`))
			return err
		},
		"merge patch, other UID": func() error {
			_, err := o.Patch(ctx, thingsGVR, "ns", "p", types.MergePatchType, []byte(`{"metadata":{"uid":"other","labels":{"x":"y"}}}`))
			return err
		},
		"delete, other UID": func() error {
			_, err := o.Delete(ctx, thingsGVR, "ns", "p", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}})
			return err
		},
		"status replaced with the UID of another object": func() error {
			other := thing()
			other.SetUID("other")
			patch := func(ctx context.Context, name string, pt types.PatchType, data []byte, sub ...string) (metav1.Object, error) {
				return o.Patch(ctx, thingsGVR, "ns", name, pt, data, sub...)
			}
			// The failed test of the UID is 422 without causes, which
			// status.Replace reads as a conflict.
			_, err := status.Replace(ctx, patch, thingsGVR.GroupResource(), other, map[string]any{"b": 2}, true)
			return err
		},
	} {
		if err := write(); !apierrors.IsConflict(err) {
			t.Errorf("%s: %v, want a conflict", name, err)
		}
	}
	if got, _ := o.Get(thingsGVR, "ns", "p"); got.GetResourceVersion() != "1" || len(got.GetLabels()) != 0 {
		t.Errorf("refused writes changed the object: %v", got)
	}
	written, err := o.Patch(ctx, thingsGVR, "ns", "p", types.MergePatchType, []byte(`{"metadata":{"uid":"uid-ns/p","resourceVersion":"1","labels":{"x":"y"}}}`))
	if err != nil || written.GetResourceVersion() == "1" || written.GetLabels()["x"] != "y" {
		t.Errorf("a patch whose preconditions hold: %v, %v", written, err)
	}
}

// TestObjectsStatusSubresource: a write of the status subresource
// changes only .status; a write of the object keeps the stored .status.
func TestObjectsStatusSubresource(t *testing.T) {
	o := NewObjects([]schema.GroupVersionResource{thingsGVR}, thing())
	ctx := t.Context()
	if _, err := o.Patch(ctx, thingsGVR, "ns", "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}},"status":{"a":2}}`), "status"); err != nil {
		t.Fatal(err)
	}
	got, _ := o.Get(thingsGVR, "ns", "p")
	if got.GetLabels()["x"] != "" || got.Object["status"].(map[string]any)["a"] != int64(2) {
		t.Errorf("after a status patch: labels %v, status %v; want the status alone changed", got.GetLabels(), got.Object["status"])
	}
	if _, err := o.Patch(ctx, thingsGVR, "ns", "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}},"status":{"a":3}}`)); err != nil {
		t.Fatal(err)
	}
	got, _ = o.Get(thingsGVR, "ns", "p")
	if got.GetLabels()["x"] != "y" || got.Object["status"].(map[string]any)["a"] != int64(2) {
		t.Errorf("after a patch of the object: labels %v, status %v; want the labels alone changed", got.GetLabels(), got.Object["status"])
	}
}

// TestObjectsFinalizersHoldADelete: a delete of an object with
// finalizers marks it deleted and returns it; the write that removes
// its last finalizer removes it. The fake dynamic client's writes are
// the store's.
func TestObjectsFinalizersHoldADelete(t *testing.T) {
	cm := Object("v1", "ConfigMap", "ns", "c", nil, nil)
	cm.SetFinalizers([]string{"f"})
	o := NewObjects(nil, cm)
	ctx := t.Context()
	left, err := o.Delete(ctx, configMapsGVR, "ns", "c", metav1.DeleteOptions{})
	if err != nil || left == nil || left.DeletionTimestamp == nil {
		t.Fatalf("Delete = %v, %v; want the object, being deleted", left, err)
	}
	patched, err := o.Client().Resource(configMapsGVR).Namespace("ns").Patch(ctx, "c", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.GetResourceVersion() == left.ResourceVersion {
		t.Errorf("the client's patch kept resourceVersion %s", patched.GetResourceVersion())
	}
	if got, ok := o.Get(configMapsGVR, "ns", "c"); ok {
		t.Errorf("the object is still there without finalizers: %v", got)
	}
}

// TestObjectsRefusesAnInvalidName: a create whose name is not a DNS-1123
// subdomain is Invalid and stores nothing, as kube-apiserver answers for a
// ConfigMap; a valid name is stored.
func TestObjectsRefusesAnInvalidName(t *testing.T) {
	o := NewObjects(nil)
	_, err := o.Create(context.Background(), configMapsGVR, "ns", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not-A-Valid-Name"}}`))
	if !apierrors.IsInvalid(err) {
		t.Errorf("create Not-A-Valid-Name: %v, want Invalid", err)
	}
	if _, ok := o.Get(configMapsGVR, "ns", "Not-A-Valid-Name"); ok {
		t.Error("the object with an invalid name was stored")
	}
	if _, err := o.Create(context.Background(), configMapsGVR, "ns", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a.valid-name"}}`)); err != nil {
		t.Errorf("create a.valid-name: %v", err)
	}
}
