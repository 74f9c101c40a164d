package inmemory

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TestInformerIndexesItsObjects: the in-memory informer answers with the
// informer's own indexes: orphans by namespace and selector, children by
// owner UID.
func TestInformerIndexesItsObjects(t *testing.T) {
	cm := func(ns, name, owner string, l map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(l)
		if owner != "" {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "P", Name: "p", UID: types.UID("uid-" + owner), Controller: new(true)}})
		}
		return u
	}
	i := Informer(t, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		cm("a", "orphan", "", map[string]string{"app": "x"}),
		cm("a", "other-orphan", "", map[string]string{"app": "y"}),
		cm("b", "orphan", "", map[string]string{"app": "x"}),
		cm("a", "child", "p", nil))
	names := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
		return out
	}
	if got := names(i.Orphans("a", labels.SelectorFromSet(labels.Set{"app": "x"}))); len(got) != 1 || got[0] != "a/orphan" {
		t.Errorf("orphans app=x of a: %v, want [a/orphan]", got)
	}
	if got := names(i.Orphans("", labels.SelectorFromSet(labels.Set{"app": "x"}))); len(got) != 2 {
		t.Errorf("orphans app=x everywhere: %v, want a/orphan and b/orphan", got)
	}
	if got := names(i.OwnedBy("a", "uid-p")); len(got) != 1 || got[0] != "a/child" {
		t.Errorf("owned by p: %v, want [a/child]", got)
	}
}

func TestResourcesKnowsWhatItIsGiven(t *testing.T) {
	m := Resources(t, &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}}})
	res, err := m.Get(t.Context(), "v1", "configmaps")
	if err != nil || res.Kind != "ConfigMap" || !res.Namespaced {
		t.Fatalf("Get(v1, configmaps) = %+v, %v", res, err)
	}
	if _, err := m.Get(t.Context(), "v1", "secrets"); err == nil {
		t.Error("secrets found, but were never given")
	}
}
