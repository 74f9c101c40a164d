package integration

import (
	"context"
	"slices"
	"testing"

	"github.com/metactl/metactl/pkg/dynamic/objectclient"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// TestRESTClientDeleteAndWarnings deletes through objectclient.Client with
// a UID precondition, as children are deleted, and checks that a write
// under objectclient.WithWarnings gets the API server's own warning for an
// unknown field, which kube-apiserver sends for a request that does not
// ask for strict field validation.
func TestRESTClientDeleteAndWarnings(t *testing.T) {
	ctx := context.Background()
	c, err := objectclient.New(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	name := "delete-" + rand.String(6)
	var warnings []string
	wctx := objectclient.WithWarnings(ctx, func(text string) { warnings = append(warnings, text) })
	created, err := c.Create(wctx, gvr, "default", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"},"dat":{"k":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`unknown field "dat"`}; !slices.Equal(warnings, want) {
		t.Errorf("warnings on create: %q, want %q", warnings, want)
	}

	wrongUID := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("not-its-uid"))}}
	if err := c.Delete(ctx, gvr, "default", name, wrongUID); !apierrors.IsConflict(err) {
		t.Errorf("deleting with another UID as precondition: %v, want Conflict", err)
	}
	opts := metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(created.UID)},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}
	if err := c.Delete(ctx, gvr, "default", name, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(gvr).Namespace("default").Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the delete: %v, want NotFound", err)
	}
	if err := c.Delete(ctx, gvr, "default", name, opts); !apierrors.IsNotFound(err) {
		t.Errorf("deleting it again: %v, want NotFound", err)
	}
}
