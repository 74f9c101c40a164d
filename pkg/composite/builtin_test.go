//go:build integration

package composite_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// builtinController is compositeController for a built-in parent: no
// spec.selector there, so generateSelector.
func builtinController(t *testing.T, h *testHook, parent schema.GroupVersionResource) *unstructured.Unstructured {
	return compositeController(t, h, parent, func(spec map[string]any) {
		spec["generateSelector"] = true
	})
}

// storedStatus decodes the engine.StatusAnnotation of obj; nil without
// one.
func storedStatus(t *testing.T, obj *unstructured.Unstructured) map[string]any {
	t.Helper()
	raw, ok := obj.GetAnnotations()[engine.StatusAnnotation]
	if !ok {
		return nil
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("the %s annotation is not JSON: %v: %q", engine.StatusAnnotation, err, raw)
	}
	return st
}

// stepAndChild is stepHook with one ConfigMap child in namespace ns, and
// a resync every second, so that a test sees the hook called again and
// again (a second, not less: a resync before the cache has the status
// write would read the parent as it was, and rightly write again).
func stepAndChild(ns string) func(req *syncRequest) any {
	return func(req *syncRequest) any {
		answer := stepHook(req).(map[string]any)
		child := configMapChild(req.Parent, req.Parent.GetName()+"-child", map[string]any{"x": "y"})
		child["metadata"].(map[string]any)["namespace"] = ns
		answer["children"] = []any{child}
		answer["resyncAfterSeconds"] = 1
		return answer
	}
}

// settlesWithOneStatusWrite checks that the hook, whose status depends on
// its own (stepHook), reached "two" with one status write (writes0: the
// controller's count before it started), and that the resyncs after it
// write no status and are given the stored status back: each starts from
// status.step "two" and so ends at its first call. Without the stored
// status given back, each resync would start from "" and call the hook
// with "", "one", "two" again.
func settlesWithOneStatusWrite(t *testing.T, hook *testHook, cc *unstructured.Unstructured, writes0 float64) {
	t.Helper()
	n := len(hook.requestsSnapshot())
	// The first two new calls may belong to a sync that started before the
	// cache had the status write; three calls after them: any three
	// consecutive calls of syncs that start from "" include one given "".
	testenv.Eventually(t, 30*time.Second, "five more calls", func(context.Context) (bool, error) {
		return len(hook.requestsSnapshot()) >= n+5, nil
	})
	if got := controllertest.Writes(cc.GetName(), "patch", "status") - writes0; got != 1 {
		t.Errorf("status writes = %v, want 1: the stored status is not given back to the hook", got)
	}
	for i, r := range hook.requestsSnapshot()[n+2:] {
		if step, _, _ := unstructured.NestedString(r.Parent.Object, "status", "step"); step != "two" {
			t.Errorf("call %d after the status write was given status.step %q, want two: the stored status is not given back to the hook", n+3+i, step)
		}
	}
	if got := controllertest.Unsettled(cc.GetName()); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0", got)
	}
}

// TestNamespaceParentStatusInAnnotation: a Namespace parent keeps the
// hook's status (and observedGeneration) in the annotation, is given it
// back as parent.status, settles with one status write, and its real
// status (phase Active) is untouched.
func TestNamespaceParentStatusInAnnotation(t *testing.T) {
	shared(t)
	childNS := env.CreateNamespace(t)
	hook := newTestHook(t, stepAndChild(childNS))
	cc := builtinController(t, hook, namespacesGVR)
	writes0 := controllertest.Writes(cc.GetName(), "patch", "status")
	startController(t, cc)
	name := testLabel(t)
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"test": name}},
	}}
	if _, err := env.Dynamic.Resource(namespacesGVR).Create(ctx(t), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(namespacesGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	got := waitFor(t, namespacesGVR, "", name, "status step two in the annotation", func(o *unstructured.Unstructured) bool {
		return o != nil && storedStatus(t, o)["step"] == "two"
	})
	if og := storedStatus(t, got)["observedGeneration"]; og == nil {
		t.Errorf("the stored status has no observedGeneration: %v", storedStatus(t, got))
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Active" {
		t.Errorf("status.phase = %q, want Active: the real status was touched", phase)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "status", "step"); found {
		t.Errorf("the hook's status went into the Namespace's real status: %v", got.Object["status"])
	}
	waitFor(t, configMapsGVR, childNS, name+"-child", "the child", exists)
	settlesWithOneStatusWrite(t, hook, cc, writes0)
}

// TestConfigMapParentStatusInAnnotation: a ConfigMap (no status at all)
// as a parent keeps the hook's status in the annotation and gives it back.
func TestConfigMapParentStatusInAnnotation(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, stepAndChild(ns))
	cc := builtinController(t, hook, configMapsGVR)
	writes0 := controllertest.Writes(cc.GetName(), "patch", "status")
	startController(t, cc)
	name := testLabel(t)
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "parent", "namespace": ns, "labels": map[string]any{"test": name}},
		"data":     map[string]any{"k": "v"},
	}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "parent", "status step two in the annotation", func(o *unstructured.Unstructured) bool {
		return o != nil && storedStatus(t, o)["step"] == "two"
	})
	settlesWithOneStatusWrite(t, hook, cc, writes0)
}

// TestDeploymentParentRealStatusUntouched: a Deployment has a status
// subresource whose schema is Kubernetes'; the hook's status goes into
// the annotation and the Deployment's status stays as its controller
// wrote it.
func TestDeploymentParentRealStatusUntouched(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"mine": "yes"}, "resyncAfterSeconds": 0.1}
	})
	cc := builtinController(t, hook, deploymentsGVR)
	name := testLabel(t)
	deploy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": ns, "labels": map[string]any{"test": name}},
		"spec": map[string]any{
			"replicas": int64(0),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}},
			},
		},
	}}
	client := env.Dynamic.Resource(deploymentsGVR).Namespace(ns)
	if _, err := client.Create(ctx(t), deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The status the Deployment controller would write (none runs here).
	realStatus := `{"status":{"observedGeneration":1,"replicas":0,"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok"}]}}`
	if _, err := client.Patch(ctx(t), "web", types.MergePatchType, []byte(realStatus), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	before, err := client.Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startController(t, cc)
	got := waitFor(t, deploymentsGVR, ns, "web", "the hook's status in the annotation", func(o *unstructured.Unstructured) bool {
		return o != nil && storedStatus(t, o)["mine"] == "yes"
	})
	if want, have := before.Object["status"], got.Object["status"]; !equalJSON(want, have) {
		t.Errorf("the Deployment's status changed:\nbefore %v\nafter  %v", want, have)
	}
	// The hook was given its own status, not the Deployment's.
	calls := hook.calls.Load()
	testenv.Eventually(t, 30*time.Second, "another sync", func(context.Context) (bool, error) { return hook.calls.Load() > calls, nil })
	last := hook.lastRequest()
	if mine, _, _ := unstructured.NestedString(last.Parent.Object, "status", "mine"); mine != "yes" {
		t.Errorf("parent.status given to the hook = %v, want its own status", last.Parent.Object["status"])
	}
}

// TestStatusAnnotationSizeBound: a status too large for the annotation
// is not written; the parent gets a SyncError Event that says why, keeps
// the status it had, and the children are written all the same.
func TestStatusAnnotationSizeBound(t *testing.T) {
	ns := env.CreateNamespace(t)
	big := strings.Repeat("x", engine.MaxStatusAnnotationBytes)
	hook := newTestHook(t, func(req *syncRequest) any {
		st := map[string]any{"size": "small"}
		if req.Parent.GetLabels()["size"] == "big" {
			st = map[string]any{"size": "big", "blob": big}
		}
		return map[string]any{"status": st, "children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-"+req.Parent.GetLabels()["size"], nil)}}
	})
	cc := builtinController(t, hook, configMapsGVR)
	startController(t, cc)
	name := testLabel(t)
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "parent", "namespace": ns, "labels": map[string]any{"test": name, "size": "small"}},
	}}
	client := env.Dynamic.Resource(configMapsGVR).Namespace(ns)
	if _, err := client.Create(ctx(t), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "parent", "the small status", func(o *unstructured.Unstructured) bool {
		return o != nil && storedStatus(t, o)["size"] == "small"
	})
	if _, err := client.Patch(ctx(t), "parent", types.MergePatchType, []byte(`{"metadata":{"labels":{"size":"big"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, ns, "parent", "SyncError", "more than the 65536 bytes the "+engine.StatusAnnotation+" annotation holds")
	waitFor(t, configMapsGVR, ns, "parent-big", "the child of the answer with the big status", exists)
	got, err := client.Get(ctx(t), "parent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := storedStatus(t, got); st["size"] != "small" {
		t.Errorf("stored status = %v, want the previous one kept", st)
	}
}

// equalJSON compares two values as JSON.
func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestPrunedStatusFieldsWarned: a custom resource keeps the hook's status
// in .status even where its schema prunes some of it; the fields the API
// server dropped are named in a StatusPruned Warning Event, with what to
// do.
func TestPrunedStatusFieldsWarned(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "prunedthings"}
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(*syncRequest) any {
		return map[string]any{"status": map[string]any{"undeclared": "x", "nested": map[string]any{"a": 1}}, "children": []any{}}
	})
	startController(t, compositeController(t, hook, gvr, nil))
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "PrunedThing",
		"metadata": map[string]any{"name": "p1", "namespace": ns, "labels": map[string]any{"test": testLabel(t)}},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "p1"}}}}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx(t), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, ns, "p1", engine.ReasonStatusPruned, ".status.nested, .status.undeclared")
	got := waitFor(t, gvr, ns, "p1", "observedGeneration in .status", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "observedGeneration") != nil
	})
	if _, ok := got.GetAnnotations()[engine.StatusAnnotation]; ok {
		t.Errorf("a custom resource got the %s annotation", engine.StatusAnnotation)
	}
}
