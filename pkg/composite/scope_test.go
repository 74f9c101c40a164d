//go:build integration

package composite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// These tests check that a parent reaches only what is its own: a
// selector by absence adopts nothing, and an object of another namespace
// whose controller reference names the parent's UID is not its child.

// TestSelectorByAbsenceOnlyIsRefused: a parent whose spec.selector has no
// positive requirement (only DoesNotExist or NotIn, or none) would adopt
// every orphan ConfigMap of its namespace and delete those its hook does
// not return. It is not synced: a SyncError Event says why and how to fix
// it, the controller reports it failing, the hook is not called, and the
// orphans are left alone.
func TestSelectorByAbsenceOnlyIsRefused(t *testing.T) {
	ns := env.CreateNamespace(t)
	orphan := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "orphan", "namespace": ns},
		"data":     map[string]any{"keep": "me"},
	}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hook := newTestHook(t, func(req *syncRequest) any { return map[string]any{"children": []any{}} })
	c := startController(t, compositeController(t, hook, thingsGVR, nil))

	selectors := map[string]map[string]any{
		"does-not-exist": {"matchExpressions": []any{map[string]any{"key": "nope", "operator": "DoesNotExist"}}},
		"not-in":         {"matchExpressions": []any{map[string]any{"key": "app", "operator": "NotIn", "values": []any{"x"}}}},
		"empty":          {},
	}
	for name, selector := range selectors {
		newThing(t, thingsGVR, ns, name, map[string]any{"selector": selector})
	}
	for name := range selectors {
		waitForEvent(t, ns, name, "SyncError", "matches objects by the absence of labels only")
		waitForEvent(t, ns, name, "SyncError", "add a matchLabels entry, or a matchExpressions requirement with operator In or Exists")
	}
	testenv.Eventually(t, 30*time.Second, "the controller reports the three parents failing", func(context.Context) (bool, error) {
		s := c.Failing().Summary()
		return s.Count == len(selectors) && strings.Contains(s.Message, "absence of labels only"), nil
	})

	if n := hook.calls.Load(); n != 0 {
		t.Errorf("the hook was called %d times for parents with a selector by absence", n)
	}
	for _, name := range []string{"orphan", "kube-root-ca.crt"} {
		obj, err := get(t, configMapsGVR, ns, name)
		if apierrors.IsNotFound(err) && name == "kube-root-ca.crt" {
			continue // not published in this control plane
		}
		if err != nil {
			t.Fatalf("ConfigMap %s: %v (deleted?)", name, err)
		}
		if refs := obj.GetOwnerReferences(); len(refs) != 0 {
			t.Errorf("ConfigMap %s was adopted: ownerReferences %v", name, refs)
		}
	}
}

// forgedControllerRef is a controller reference to parent, forged on an
// object of another namespace. Its kind is one the garbage collector
// cannot resolve, so that the collector leaves the object alone (it deletes
// an object whose namespaced owner is not in its namespace) and only
// metactl could touch it: metactl finds an owner's objects by the owner's
// UID.
func forgedControllerRef(parent *unstructured.Unstructured) []any {
	return []any{map[string]any{"apiVersion": "forged.metactl.io/v1", "kind": "Forged", "name": parent.GetName(),
		"uid": string(parent.GetUID()), "controller": true, "blockOwnerDeletion": true}}
}

// resyncEverySecond makes the controller sync every parent each second.
func resyncEverySecond(cc *unstructured.Unstructured) *unstructured.Unstructured {
	cc.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
	return cc
}

// waitForCalls waits until the hook has been called n more times than
// when it was called.
func waitForCalls(t *testing.T, h *testHook, n int64) {
	t.Helper()
	want := h.calls.Load() + n
	testenv.Eventually(t, 30*time.Second, "more syncs", func(context.Context) (bool, error) {
		return h.calls.Load() >= want, nil
	})
}

// TestForgedChildInAnotherNamespace: a ConfigMap of namespace B that
// matches the selector of a parent of namespace A, with a controller
// reference to that parent's UID, is not the parent's child: its hook is
// never given it, and metactl neither deletes, updates nor releases it,
// sync after sync.
func TestForgedChildInAnotherNamespace(t *testing.T) {
	nsA, nsB := env.CreateNamespace(t), env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, resyncEverySecond(compositeController(t, hook, thingsGVR, nil)))
	parent := newThing(t, thingsGVR, nsA, "p1", map[string]any{"value": "v"})
	waitFor(t, configMapsGVR, nsA, "p1-cm", "created", exists)

	forged := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "forged", "namespace": nsB,
			"labels": map[string]any{"parent": "p1"}, "ownerReferences": forgedControllerRef(parent)},
		"data": map[string]any{"value": "planted"},
	}}
	planted, err := env.Dynamic.Resource(configMapsGVR).Namespace(nsB).Create(ctx(t), forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForCalls(t, hook, 3)

	for _, req := range hook.requestsSnapshot() {
		for key, child := range req.Children["ConfigMap.v1"] {
			if child.GetNamespace() != nsA {
				t.Fatalf("the hook was given %s (namespace %s) as a child of a parent of %s", key, child.GetNamespace(), nsA)
			}
		}
	}
	obj, err := get(t, configMapsGVR, nsB, "forged")
	if err != nil {
		t.Fatalf("the forged child: %v (deleted?)", err)
	}
	if obj.GetResourceVersion() != planted.GetResourceVersion() {
		t.Errorf("the forged child was written (resourceVersion %s, created %s): ownerReferences %v, data %v",
			obj.GetResourceVersion(), planted.GetResourceVersion(), obj.GetOwnerReferences(), obj.Object["data"])
	}
}

// TestForgedRevisionInAnotherNamespace: a ControllerRevision of namespace
// B with a controller reference to the UID of a parent of namespace A,
// recording other parent fields, is not the parent's revision: the hook is
// never called with its fields, and it is neither deleted nor changed.
func TestForgedRevisionInAnotherNamespace(t *testing.T) {
	nsA, nsB := env.CreateNamespace(t), env.CreateNamespace(t)
	hook := newTestHook(t, templateHook)
	startController(t, resyncEverySecond(templateController(t, hook)))
	parent := mcParent(t, nsA, "p1", 1, podTemplate("p1", "v1"))
	waitFor(t, childThingsGVR, nsA, "p1-0", "created", exists)

	patch := map[string]any{"spec": map[string]any{"template": podTemplate("p1", "forged")}}
	forged := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "ControllerRevision",
		"metadata": map[string]any{"name": mcRevisionName(parent, patch), "namespace": nsB,
			"labels":          map[string]any{"app": "p1", "metacontroller.k8s.io/apiGroup": "test.metactl.io", "metacontroller.k8s.io/resource": "things"},
			"ownerReferences": forgedControllerRef(parent)},
		"parentPatch": patch,
		"children":    []any{map[string]any{"apiGroup": "test.metactl.io", "kind": "ChildThing", "names": []any{"p1-0"}}},
	}}
	revisions := env.Dynamic.Resource(v1alpha1.ControllerRevisionResource).Namespace(nsB)
	planted, err := revisions.Create(ctx(t), forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForCalls(t, hook, 3)

	for _, req := range hook.requestsSnapshot() {
		if v, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "template", "spec", "version"); v != "v1" {
			t.Fatalf("the hook was called with the parent as a revision of namespace %s records it (version %q)", nsB, v)
		}
	}
	obj, err := revisions.Get(ctx(t), planted.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the forged revision: %v (deleted?)", err)
	}
	if obj.GetResourceVersion() != planted.GetResourceVersion() {
		t.Errorf("the forged revision was written: %v", obj.Object)
	}
	if child, err := get(t, childThingsGVR, nsA, "p1-0"); err != nil || child.Object["spec"].(map[string]any)["version"] != "v1" {
		t.Errorf("child p1-0 = %v, %v; want version v1", child, err)
	}
}
