//go:build integration

package composite_test

import (
	"context"
	"crypto/sha1" // metacontroller names revisions by a SHA-1 hash
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// These tests start metactl on objects written the way metacontroller
// writes them for a RollingInPlace controller (its ControllerRevisions,
// children, parent status), to check that a switch from metacontroller
// to metactl changes nothing.

// templateChild is child i of a pod-template-style parent, as the hook
// answers it: the template's labels and spec.
func templateChild(parent string, i int, template map[string]any) map[string]any {
	labels, _, _ := unstructured.NestedMap(template, "metadata", "labels")
	spec, _, _ := unstructured.NestedMap(template, "spec")
	return map[string]any{
		"apiVersion": "test.metactl.io/v1", "kind": "ChildThing",
		"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", parent, i), "labels": labels},
		"spec":     spec,
	}
}

// templateHook answers spec.replicas children from spec.template, and
// status {replicas}.
func templateHook(req *syncRequest) any {
	replicas, _, _ := unstructured.NestedInt64(req.Parent.Object, "spec", "replicas")
	template, _, _ := unstructured.NestedMap(req.Parent.Object, "spec", "template")
	children := []any{}
	for i := range int(replicas) {
		children = append(children, templateChild(req.Parent.GetName(), i, template))
	}
	return map[string]any{"children": children, "status": map[string]any{"replicas": replicas}}
}

func podTemplate(app, version string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": app}},
		"spec":     map[string]any{"version": version, "port": int64(8080)},
	}
}

// templateController is a CompositeController of things with
// RollingInPlace childthings (status check Ready=True) whose revisions
// record spec.template.
func templateController(t *testing.T, hook *testHook) *unstructured.Unstructured {
	return compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["parentResource"].(map[string]any)["revisionHistory"] = map[string]any{"fieldPaths": []any{"spec.template"}}
		spec["childResources"] = []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "childthings",
			"updateStrategy": map[string]any{"method": "RollingInPlace", "statusChecks": map[string]any{
				"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}}}
	})
}

// mcParent creates a parent p with replicas children from template.
func mcParent(t *testing.T, ns, name string, replicas int64, tmpl map[string]any) *unstructured.Unstructured {
	t.Helper()
	return newThing(t, thingsGVR, ns, name, map[string]any{
		"replicas": replicas,
		"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
		"template": tmpl,
	})
}

// mcRevisionName is metacontroller's name of a parent's revision:
// <resource>.<group>-<hex SHA-1 of the parent's UID and the recorded
// fields as JSON>.
func mcRevisionName(parent *unstructured.Unstructured, patch map[string]any) string {
	data, err := json.Marshal(patch)
	if err != nil {
		panic(err)
	}
	sum := sha1.Sum(append([]byte(parent.GetUID()), data...))
	return "things.test.metactl.io-" + hex.EncodeToString(sum[:])
}

func mcControllerRef(parent *unstructured.Unstructured) []any {
	return []any{map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Thing", "name": parent.GetName(),
		"uid": string(parent.GetUID()), "controller": true, "blockOwnerDeletion": true}}
}

// mcRevision creates a ControllerRevision of parent recording tmpl and
// listing names, as metacontroller writes it; without its owner
// reference when orphan.
func mcRevision(t *testing.T, parent *unstructured.Unstructured, tmpl map[string]any, names []string, orphan bool) *unstructured.Unstructured {
	t.Helper()
	patch := map[string]any{"spec": map[string]any{"template": tmpl}}
	app, _, _ := unstructured.NestedString(tmpl, "metadata", "labels", "app")
	metadata := map[string]any{
		"name": mcRevisionName(parent, patch), "namespace": parent.GetNamespace(),
		"labels": map[string]any{"app": app, "metacontroller.k8s.io/apiGroup": "test.metactl.io", "metacontroller.k8s.io/resource": "things"},
	}
	if !orphan {
		metadata["ownerReferences"] = mcControllerRef(parent)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "ControllerRevision",
		"metadata": metadata, "parentPatch": patch,
		"children": []any{map[string]any{"apiGroup": "test.metactl.io", "kind": "ChildThing", "names": toAnySlice(names)}},
	}}
	created, err := env.Dynamic.Resource(v1alpha1.ControllerRevisionResource).Namespace(parent.GetNamespace()).Create(ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating revision: %v", err)
	}
	return created
}

// mcChild creates child i of parent from tmpl as metacontroller writes
// it: the last-applied annotation holds the hook's object with the
// parent's namespace, the parent is its controller; its status says ready
// (Ready=True or False) at its generation.
func mcChild(t *testing.T, parent *unstructured.Unstructured, i int, tmpl map[string]any, ready string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: templateChild(parent.GetName(), i, tmpl)}
	obj.SetNamespace(parent.GetNamespace())
	lastApplied, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{"metacontroller.k8s.io/last-applied-configuration": string(lastApplied)})
	obj.Object["metadata"].(map[string]any)["ownerReferences"] = mcControllerRef(parent)
	client := env.Dynamic.Resource(childThingsGVR).Namespace(parent.GetNamespace())
	created, err := client.Create(ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating child: %v", err)
	}
	status := fmt.Sprintf(`{"status":{"observedGeneration":%d,"conditions":[{"type":"Ready","status":%q}]}}`, created.GetGeneration(), ready)
	if _, err := client.Patch(ctx(t), created.GetName(), types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// mcStatus writes the parent's status as metacontroller does: the hook's
// status, observedGeneration, and the Updated condition.
func mcStatus(t *testing.T, parent *unstructured.Unstructured, replicas int64, updated map[string]any) {
	t.Helper()
	p, err := get(t, thingsGVR, parent.GetNamespace(), parent.GetName())
	if err != nil {
		t.Fatal(err)
	}
	p.Object["status"] = map[string]any{"replicas": replicas, "observedGeneration": p.GetGeneration(), "conditions": []any{updated}}
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(p.GetNamespace()).UpdateStatus(ctx(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rvSnapshot returns the resourceVersion of every object of the resources
// in ns, by resource and name.
func rvSnapshot(t *testing.T, ns string, gvrs ...schema.GroupVersionResource) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvr := range gvrs {
		list, err := env.Dynamic.Resource(gvr).Namespace(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range list.Items {
			out[gvr.Resource+"/"+item.GetName()] = item.GetResourceVersion()
		}
	}
	return out
}

// objectWritesBy returns the controller's writes by verb and target, as counted by
// metactl_object_writes_total, leaving out zeroes.
func objectWritesBy(controller string) map[string]float64 {
	out := map[string]float64{}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		for _, target := range []string{"child", "status", "finalizer", "ownership", "revision"} {
			if n := controllertest.Writes(controller, verb, target); n != 0 {
				out[verb+" "+target] = n
			}
		}
	}
	return out
}

// settleSyncs waits until every sync the controller started has ended and
// each parent had at least min[parent] syncs, counting a parent's syncs by
// its hook calls (perSync[parent] calls per sync); it fails on a failed
// sync.
func settleSyncs(t *testing.T, controller string, hook *testHook, min, perSync map[string]int) {
	t.Helper()
	syncs := func(result string) int {
		return int(controllertest.Syncs(controller, result))
	}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("syncs %v, all ended", min), func(context.Context) (bool, error) {
		calls := map[string]int{}
		for _, req := range hook.requestsSnapshot() {
			calls[req.Parent.GetName()]++
		}
		started := 0
		for parent, want := range min {
			if calls[parent] < want*perSync[parent] {
				return false, nil
			}
			started += (calls[parent] + perSync[parent] - 1) / perSync[parent] // one may be under way
		}
		return syncs("success")+syncs("error") >= started, nil
	})
	if n := syncs("error"); n > 0 {
		t.Fatalf("%d syncs failed", n)
	}
}

// TestSwitchFromMetacontrollerWritesNothing takes over two parents from
// metacontroller: p1 rolled out (OnLatestRevision), p2 in mid-rollout
// (its latest revision holds p2-0, on v2 but not ready; its old one
// p2-1, on v1), with the revisions, children and status metacontroller
// wrote. metactl recognises both revisions (calling the hook with the old
// revision's template), computes the same Updated condition and writes
// nothing: no write counted, no resourceVersion changed, no object added.
func TestSwitchFromMetacontrollerWritesNothing(t *testing.T) {
	ns := env.CreateNamespace(t)
	v1, v2 := podTemplate("p2", "v1"), podTemplate("p2", "v2")

	p1 := mcParent(t, ns, "p1", 2, podTemplate("p1", "v2"))
	r1 := mcRevision(t, p1, podTemplate("p1", "v2"), []string{"p1-1", "p1-0"}, false)
	mcChild(t, p1, 0, podTemplate("p1", "v2"), "True")
	mcChild(t, p1, 1, podTemplate("p1", "v2"), "True")
	mcStatus(t, p1, 2, map[string]any{"type": "Updated", "status": "True", "reason": "OnLatestRevision",
		"message": "latest ControllerRevision: " + r1.GetName()})

	p2 := mcParent(t, ns, "p2", 2, v2)
	mcRevision(t, p2, v1, []string{"p2-1"}, false)
	mcRevision(t, p2, v2, []string{"p2-0"}, false)
	mcChild(t, p2, 0, v2, "False")
	mcChild(t, p2, 1, v1, "True")
	mcStatus(t, p2, 2, map[string]any{"type": "Updated", "status": "False", "reason": "RolloutWaiting",
		"message": `child ChildThing p2-0 failed status check: "Ready" condition status is "False" (want "True")`})

	before := rvSnapshot(t, ns, thingsGVR, childThingsGVR, v1alpha1.ControllerRevisionResource)
	if len(before) != 9 {
		t.Fatalf("set-up: %d objects, want 9: %v", len(before), before)
	}
	hook := newTestHook(t, templateHook)
	cc := templateController(t, hook)
	startController(t, cc)
	// p2 waits for p2-0, so metactl looks again within 5s: two syncs of it.
	settleSyncs(t, cc.GetName(), hook, map[string]int{"p1": 1, "p2": 2}, map[string]int{"p1": 1, "p2": 2})

	if w := objectWritesBy(cc.GetName()); len(w) > 0 {
		t.Errorf("metactl wrote %v, want nothing", w)
	}
	after := rvSnapshot(t, ns, thingsGVR, childThingsGVR, v1alpha1.ControllerRevisionResource)
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s changed: resourceVersion %s, was %s", key, after[key], rv)
		}
	}
	for key := range after {
		if _, ok := before[key]; !ok {
			t.Errorf("%s was created", key)
		}
	}
	sawOld := false
	for _, req := range hook.requestsSnapshot() {
		if v, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "template", "spec", "version"); req.Parent.GetName() == "p2" && v == "v1" {
			sawOld = true
		}
	}
	if !sawOld {
		t.Error("the hook was never asked about p2's old revision (v1)")
	}
	if t.Failed() {
		for _, name := range []string{"p1", "p2"} {
			if p, err := get(t, thingsGVR, ns, name); err == nil {
				t.Logf("%s status: %v", name, p.Object["status"])
			}
		}
	}
}

// TestOrphanedRevisionIsAdopted orphans a parent's only revision (as
// deleting a parent with orphan propagation does): metactl adopts it by
// the parent's selector and the labels naming the parent's resource, and
// uses it as the latest revision (no new one, no other write). A revision
// that the selector matches but whose labels name another resource is
// left alone.
func TestOrphanedRevisionIsAdopted(t *testing.T) {
	ns := env.CreateNamespace(t)
	p1 := mcParent(t, ns, "p1", 1, podTemplate("p1", "v1"))
	orphan := mcRevision(t, p1, podTemplate("p1", "v1"), []string{"p1-0"}, true)
	mcChild(t, p1, 0, podTemplate("p1", "v1"), "True")
	mcStatus(t, p1, 1, map[string]any{"type": "Updated", "status": "True", "reason": "OnLatestRevision",
		"message": "latest ControllerRevision: " + orphan.GetName()})
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "ControllerRevision",
		"metadata": map[string]any{"name": "otherthings.test.metactl.io-0", "namespace": ns,
			"labels": map[string]any{"app": "p1", "metacontroller.k8s.io/apiGroup": "test.metactl.io", "metacontroller.k8s.io/resource": "otherthings"}},
		"parentPatch": map[string]any{},
	}}
	if _, err := env.Dynamic.Resource(v1alpha1.ControllerRevisionResource).Namespace(ns).Create(ctx(t), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := rvSnapshot(t, ns, thingsGVR, childThingsGVR)

	hook := newTestHook(t, templateHook)
	cc := templateController(t, hook)
	startController(t, cc)
	adopted := waitFor(t, v1alpha1.ControllerRevisionResource, ns, orphan.GetName(), "adopted by p1", func(o *unstructured.Unstructured) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.UID == p1.GetUID()
	})
	settleSyncs(t, cc.GetName(), hook, map[string]int{"p1": 1}, map[string]int{"p1": 1})

	if got := fmt.Sprint(adopted.Object["children"]); !strings.Contains(got, "p1-0") {
		t.Errorf("the adopted revision's children changed: %s", got)
	}
	list, err := env.Dynamic.Resource(v1alpha1.ControllerRevisionResource).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range list.Items {
		switch item.GetName() {
		case orphan.GetName():
		case other.GetName():
			if refs := item.GetOwnerReferences(); len(refs) > 0 {
				t.Errorf("the revision of another resource was adopted: %v", refs)
			}
		default:
			t.Errorf("a new revision %s was created", item.GetName())
		}
	}
	if w, want := objectWritesBy(cc.GetName()), map[string]float64{"patch ownership": 1}; fmt.Sprint(w) != fmt.Sprint(want) {
		t.Errorf("writes = %v, want %v (the adoption only)", w, want)
	}
	after := rvSnapshot(t, ns, thingsGVR, childThingsGVR)
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s changed: resourceVersion %s, was %s", key, after[key], rv)
		}
	}
}

func toAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
