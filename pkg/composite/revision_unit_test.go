package composite

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestUncachedRevision: a revision an earlier sync created, which the cache
// does not have yet, is used when it is the parent's and records the same
// fields; anything else is a conflict, retried.
func TestUncachedRevision(t *testing.T) {
	parent := &unstructured.Unstructured{}
	parent.SetUID("parent-uid")
	stored := func(name, owner string, patch map[string]any) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{Object: map[string]any{"parentPatch": patch}}
		obj.SetAPIVersion(v1alpha1.ControllerRevisionResource.GroupVersion().String())
		obj.SetKind("ControllerRevision")
		obj.SetNamespace("ns")
		obj.SetName(name)
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "p", UID: "parent-uid", Controller: new(true)}})
		if owner != "parent-uid" {
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "q", UID: "other", Controller: new(true)}})
		}
		return obj
	}
	patch := map[string]any{"spec": map[string]any{"version": "v1"}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.ControllerRevisionResource: "ControllerRevisionList"},
		stored("ours", "parent-uid", patch),
		stored("theirs", "other", patch),
		stored("other-fields", "parent-uid", map[string]any{"spec": map[string]any{"version": "v2"}}),
	).Resource(v1alpha1.ControllerRevisionResource).Namespace("ns")
	c := &Controller{name: "test"}
	for _, tc := range []struct {
		name     string
		conflict bool
	}{
		{"ours", false},
		{"theirs", true},
		{"other-fields", true},
		{"gone", true},
	} {
		obj, err := c.uncachedRevision(context.Background(), client, parent, &revision{name: tc.name, patch: patch})
		switch {
		case tc.conflict && !apierrors.IsConflict(err):
			t.Errorf("%s: err = %v, want a conflict", tc.name, err)
		case !tc.conflict && (err != nil || obj == nil || obj.GetName() != tc.name):
			t.Errorf("%s: got %v, %v; want the stored revision", tc.name, obj, err)
		}
	}
}
