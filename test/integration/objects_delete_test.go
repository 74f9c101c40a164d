package integration

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// TestRESTClientDeleteAndWarnings deletes through objectclient.Client with
// a UID precondition, as children are deleted, and checks that a write
// with objectclient.Warnings gets the API server's own warning for an
// unknown field, which kube-apiserver sends for a request that does not
// ask for strict field validation.
func TestRESTClientDeleteAndWarnings(t *testing.T) {
	ctx := context.Background()
	c := objectClient(t)

	name := "delete-" + rand.String(6)
	var warnings []string
	warn := objectclient.Warnings(func(text string) { warnings = append(warnings, text) })
	created, err := c.Create(ctx, configMaps, "default", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"},"dat":{"k":"v"}}`), warn)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`unknown field "dat"`}; !slices.Equal(warnings, want) {
		t.Errorf("warnings on create: %q, want %q", warnings, want)
	}

	wrongUID := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("not-its-uid"))}}
	if _, err := c.Delete(ctx, configMaps, "default", name, wrongUID); !apierrors.IsConflict(err) {
		t.Errorf("deleting with another UID as precondition: %v, want Conflict", err)
	}
	opts := metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(created.UID)},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}
	if left, err := c.Delete(ctx, configMaps, "default", name, opts); err != nil || left != nil {
		t.Fatalf("deleting it: %v, %v; want nil, nil (gone)", left, err)
	}
	if _, err := env.Dynamic.Resource(configMaps).Namespace("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the delete: %v, want NotFound", err)
	}
	if _, err := c.Delete(ctx, configMaps, "default", name, opts); !apierrors.IsNotFound(err) {
		t.Errorf("deleting it again: %v, want NotFound", err)
	}
}

// TestRESTClientDeleteReturnsWhatIsLeft: a delete that must wait for a
// finalizer returns the object, its deletionTimestamp set; one that
// deletes a custom resource at once returns nil, although kube-apiserver
// answers it with the deleted object.
func TestRESTClientDeleteReturnsWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	c := objectClient(t)
	name := "held-" + rand.String(6)
	if _, err := c.Create(ctx, configMaps, "default", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`","finalizers":["example.com/hold"]}}`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = env.Dynamic.Resource(configMaps).Namespace("default").Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	left, err := c.Delete(ctx, configMaps, "default", name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil {
		t.Fatal(err)
	}
	if left == nil || left.DeletionTimestamp == nil || left.Name != name || !slices.Equal(left.Finalizers, []string{"example.com/hold"}) {
		t.Fatalf("deleting a ConfigMap held by a finalizer returned %+v, want it with its deletionTimestamp and finalizer", left)
	}

	controllers := schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	cc := "deleted-" + rand.String(6)
	if _, err := c.Create(ctx, controllers, "", []byte(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"`+cc+`"},`+
		`"spec":{"parentResource":{"apiVersion":"example.com/v1","resource":"things"},"hooks":{"sync":{"webhook":{"url":"http://127.0.0.1:1/sync"}}}}}`)); err != nil {
		t.Fatal(err)
	}
	if left, err := c.Delete(ctx, controllers, "", cc, metav1.DeleteOptions{}); err != nil || left != nil {
		t.Fatalf("deleting a custom resource without finalizers: %+v, %v; want nil, nil (gone)", left, err)
	}
}
