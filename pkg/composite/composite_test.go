//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
)

func TestCreateChildrenAndStatus(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, nil))
	parent := newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "hello"})

	child := waitFor(t, configMapsGVR, ns, "p1-cm", "created with the value", func(o *unstructured.Unstructured) bool {
		return o != nil && dataValue(o) == "hello"
	})
	ref := metav1.GetControllerOf(child)
	if ref == nil || ref.UID != parent.GetUID() || ref.Kind != "Thing" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("child's controller reference = %+v, want the parent with blockOwnerDeletion", ref)
	}
	if child.GetAnnotations()["metacontroller.k8s.io/last-applied-configuration"] == "" {
		t.Error("child has no last-applied annotation")
	}
	waitFor(t, thingsGVR, ns, "p1", "status reports the child", func(o *unstructured.Unstructured) bool {
		return statusField(o, "value") == "hello" && statusField(o, "children") == int64(1) &&
			statusField(o, "observedGeneration") == o.GetGeneration()
	})
}

func TestParentWithoutStatusSubresource(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, plainThingsGVR, nil))
	newThing(t, plainThingsGVR, ns, "p1", map[string]any{"value": "plain"})
	waitFor(t, plainThingsGVR, ns, "p1", "status written on the main resource", func(o *unstructured.Unstructured) bool {
		return statusField(o, "value") == "plain"
	})
}

func TestInPlaceUpdateAndCorrection(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "one"})
	first := waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool { return o != nil && dataValue(o) == "one" })

	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "two"})
	updated := waitFor(t, configMapsGVR, ns, "p1-cm", "updated in place", func(o *unstructured.Unstructured) bool { return o != nil && dataValue(o) == "two" })
	if updated.GetUID() != first.GetUID() {
		t.Error("InPlace replaced the child instead of updating it")
	}

	// A hand edit of a field the hook sets is corrected; a field nobody
	// declared (a label added by someone else) is kept.
	edited := updated.DeepCopy()
	_ = unstructured.SetNestedField(edited.Object, "vandalised", "data", "value")
	labels := edited.GetLabels()
	labels["added-by"] = "someone-else"
	edited.SetLabels(labels)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Update(ctx(t), edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "p1-cm", "corrected", func(o *unstructured.Unstructured) bool {
		return o != nil && dataValue(o) == "two" && o.GetLabels()["added-by"] == "someone-else"
	})
}

func TestOnDeleteLeavesEditsAndRecreatesDeleted(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}} // OnDelete by default
	}))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "one"})
	first := waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool { return o != nil })

	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "two"})
	// The status follows the new spec, so the sync happened...
	waitFor(t, thingsGVR, ns, "p1", "status on the new value", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "two" })
	// ...and the child was left as it was.
	if got, _ := get(t, configMapsGVR, ns, "p1-cm"); dataValue(got) != "one" {
		t.Errorf("OnDelete child changed to %q", dataValue(got))
	}

	if err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Delete(ctx(t), "p1-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recreated := waitFor(t, configMapsGVR, ns, "p1-cm", "recreated with the new value", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetUID() != first.GetUID() && dataValue(o) == "two"
	})
	_ = recreated
}

func TestRecreateReplacesChangedChild(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "Recreate"}}}
	}))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "one"})
	first := waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool { return o != nil })
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "two"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "recreated", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetUID() != first.GetUID() && dataValue(o) == "two"
	})
}

func TestChildDeletedByHandComesBack(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v"})
	first := waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)
	if err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Delete(ctx(t), "p1-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "p1-cm", "back", func(o *unstructured.Unstructured) bool { return o != nil && o.GetUID() != first.GetUID() })
}

func TestChildrenNoLongerDesiredAreDeleted(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		n, _, _ := unstructured.NestedInt64(req.Parent.Object, "spec", "count")
		var children []any
		for i := range n {
			children = append(children, configMapChild(req.Parent, req.Parent.GetName()+"-"+string(rune('a'+i)), nil))
		}
		return map[string]any{"children": children}
	})
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"count": int64(3)})
	waitFor(t, configMapsGVR, ns, "p1-c", "third child", exists)
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"count": int64(1)})
	waitFor(t, configMapsGVR, ns, "p1-c", "deleted", gone)
	waitFor(t, configMapsGVR, ns, "p1-b", "deleted", gone)
	if _, err := get(t, configMapsGVR, ns, "p1-a"); err != nil {
		t.Errorf("the child still desired is gone: %v", err)
	}
}

func TestOrphanAdoptionAndRelease(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, nil))

	orphan := &unstructured.Unstructured{Object: configMapChild(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p1"}}}, "p1-cm", map[string]any{"value": "old"})}
	orphan.SetNamespace(ns)
	created, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), orphan, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parent := newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "new"})
	adopted := waitFor(t, configMapsGVR, ns, "p1-cm", "adopted and updated", func(o *unstructured.Unstructured) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.UID == parent.GetUID() && dataValue(o) == "new"
	})
	if adopted.GetUID() != created.GetUID() {
		t.Error("the orphan was replaced instead of adopted")
	}

	// The hook stops asking for it and a label change takes it out of the
	// selector: it is released, not deleted.
	hook.answer(func(req *syncRequest) any { return map[string]any{"children": []any{}} })
	relabelled := adopted.DeepCopy()
	relabelled.SetLabels(map[string]string{"parent": "someone-else"})
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Update(ctx(t), relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	released := waitFor(t, configMapsGVR, ns, "p1-cm", "released", func(o *unstructured.Unstructured) bool {
		return o == nil || metav1.GetControllerOf(o) == nil
	})
	if released == nil || released.GetUID() != created.GetUID() {
		t.Fatal("the child that stopped matching was deleted instead of released")
	}
}

func TestGenerateSelector(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": req.Parent.GetName() + "-cm"}}
		return map[string]any{"children": []any{child}, "status": map[string]any{"seen": len(req.Children["ConfigMap.v1"])}}
	})
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) { spec["generateSelector"] = true }))
	parent := newThing(t, thingsGVR, ns, "p1", map[string]any{"selector": map[string]any{}})
	child := waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)
	if got := child.GetLabels()["controller-uid"]; got != string(parent.GetUID()) {
		t.Errorf("controller-uid label = %q, want the parent's UID", got)
	}
	waitFor(t, thingsGVR, ns, "p1", "the hook sees its child", func(o *unstructured.Unstructured) bool { return statusField(o, "seen") == int64(1) })
}

func TestCascadeOnParentDeletion(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)
	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "p1-cm", "garbage-collected", gone)
}

func TestFinalizeHook(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	finalized := make(chan struct{})
	finalize := newTestHook(t, func(req *syncRequest) any {
		if !req.Finalizing {
			t.Errorf("finalize hook called with finalizing=false")
		}
		select {
		case <-finalized:
			return map[string]any{"children": []any{}, "finalized": true}
		default:
			return map[string]any{"children": []any{}, "finalized": false, "status": map[string]any{"phase": "cleaning"}}
		}
	})
	cc := compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": finalize.server.URL + "/finalize"}}
	})
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v"})
	waitFor(t, thingsGVR, ns, "p1", "finalizer added", func(o *unstructured.Unstructured) bool {
		for _, f := range o.GetFinalizers() {
			if f == "metacontroller.io/compositecontroller-"+cc.GetName() {
				return true
			}
		}
		return false
	})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)

	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The finalize hook's empty children are applied while it is not done.
	waitFor(t, configMapsGVR, ns, "p1-cm", "deleted by the finalize hook's answer", gone)
	waitFor(t, thingsGVR, ns, "p1", "still there, cleaning", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "phase") == "cleaning"
	})
	close(finalized)
	// Nothing else happens to the parent: a resync of the finalize hook
	// comes from the hook's own status write above; poke it to be sure.
	waitFor(t, thingsGVR, ns, "p1", "gone once finalized", func(o *unstructured.Unstructured) bool {
		if o != nil {
			_, _ = env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(context.Background(), "p1", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"poke":"`+time.Now().String()+`"}}}`), metav1.PatchOptions{})
		}
		return o == nil
	})
}

// TestFinalizeSeesChildrenStillBeingDeleted: a child that a finalize
// answer deletes but a finalizer holds is still there, being deleted, in
// the next call, as in metacontroller's next sync; a hook that is done
// when it sees no children is therefore not done until the child is gone.
func TestFinalizeSeesChildrenStillBeingDeleted(t *testing.T) {
	ns := env.CreateNamespace(t)
	const hold = "example.com/hold"
	hook := newTestHook(t, func(req *syncRequest) any {
		child := configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"k": "v"})
		child["metadata"].(map[string]any)["finalizers"] = []any{hold}
		return map[string]any{"children": []any{child}}
	})
	finalize := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "finalized": len(req.Children["ConfigMap.v1"]) == 0}
	})
	cc := compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": finalize.server.URL + "/finalize"}}
	})
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", nil)
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)
	release := func() {
		_, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(context.Background(), "p1-cm", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}
	t.Cleanup(release)

	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a finalize call that sees the child being deleted", func(context.Context) (bool, error) {
		for _, req := range finalize.requestsSnapshot() {
			if cm := req.Children["ConfigMap.v1"]["p1-cm"]; cm != nil && cm.GetDeletionTimestamp() != nil {
				return true, nil
			}
		}
		return false, nil
	})
	for i, req := range finalize.requestsSnapshot() {
		if len(req.Children["ConfigMap.v1"]) == 0 {
			t.Fatalf("finalize call %d saw no children while its ConfigMap was still there, held by %s", i+1, hold)
		}
	}
	if _, err := get(t, thingsGVR, ns, "p1"); err != nil {
		t.Fatalf("the parent is gone while its child is still being deleted: %v", err)
	}

	release()
	// The child's deletion syncs the parent; its finalize call sees no
	// children and is done.
	waitFor(t, thingsGVR, ns, "p1", "gone once its child is", gone)
}

// TestResyncAfterSeconds: without events, only resyncAfterSeconds brings
// the hook back, each time after the 0.2s it asks for: not sooner, and not
// much later (an informer resync or a backoff would be seconds).
func TestResyncAfterSeconds(t *testing.T) {
	ns := env.CreateNamespace(t)
	var mu sync.Mutex
	var calls []time.Time
	hook := newTestHook(t, func(req *syncRequest) any {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return map[string]any{"children": []any{}, "resyncAfterSeconds": 0.2}
	})
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", nil)
	times := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), calls...)
	}
	// The sync of the new parent may call the hook more than once (a
	// second round to check the answer is settled, an event of metactl's
	// own write); the resyncs follow its last call.
	testenv.Eventually(t, 30*time.Second, "the first sync", func(context.Context) (bool, error) { return len(times()) >= 2, nil })
	first := len(times())
	for i, c := range times()[1:] {
		if c.Sub(times()[i]) >= 100*time.Millisecond {
			first = i + 1
			break
		}
	}
	// Five resyncs: 1s, and 2s more for a loaded machine.
	testenv.Eventually(t, 3*time.Second, "five resyncs within about 5 x 0.2s", func(context.Context) (bool, error) { return len(times()) >= first+5, nil })
	got := times()[first-1 : first+5]
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < 190*time.Millisecond || gap > time.Second {
			t.Errorf("resync %d came %v after the previous sync, want about 0.2s", i, gap.Round(time.Millisecond))
		}
	}
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"constant": "yes", "n": 1}, "resyncAfterSeconds": 0.1}
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", nil)
	writes := func() float64 {
		return controllertest.Writes(cc.GetName(), "patch", "status")
	}
	waitFor(t, thingsGVR, ns, "p1", "status", func(o *unstructured.Unstructured) bool { return statusField(o, "constant") == "yes" })
	calls := hook.calls.Load()
	testenv.Eventually(t, 30*time.Second, "ten more syncs", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+10, nil })
	if w := writes(); w != 1 {
		t.Errorf("status written %v times for %d syncs with the same status, want 1", w, hook.calls.Load())
	}
}

func TestIgnoreStatusChanges(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["parentResource"].(map[string]any)["ignoreStatusChanges"] = true
	}))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v"})
	p := waitFor(t, thingsGVR, ns, "p1", "status", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "v" })
	calls := hook.calls.Load()
	// A status written by someone else does not trigger a sync...
	p.Object["status"].(map[string]any)["other"] = "x"
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).UpdateStatus(ctx(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ...while a label change does; it also proves the status change was
	// seen by then (events are ordered).
	_, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a sync for the label change", func(context.Context) (bool, error) { return hook.calls.Load() > calls, nil })
	if got := hook.calls.Load(); got != calls+1 {
		t.Errorf("hook calls after a status change and a label change = %d, want exactly 1 (the label change)", got-calls)
	}
}

func TestParentLabelSelector(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["parentResource"].(map[string]any)["labelSelector"].(map[string]any)["matchLabels"].(map[string]any)["managed"] = "yes"
	}))
	ignored := newThing(t, thingsGVR, ns, "ignored", map[string]any{"value": "v"})
	_ = ignored
	selected := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metactl.io/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "selected", "namespace": ns, "labels": map[string]any{"managed": "yes", "test": testLabel(t)}},
		"spec":     map[string]any{"value": "v", "selector": map[string]any{"matchLabels": map[string]any{"parent": "selected"}}},
	}}
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), selected, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "selected-cm", "created", exists)
	// Events are handled in order, and "ignored" was created first: by now
	// it has been looked at and skipped.
	if _, err := get(t, configMapsGVR, ns, "ignored-cm"); err == nil {
		t.Error("a parent outside the labelSelector got children")
	}
	for _, r := range hook.requestsSnapshot() {
		if r.Parent.GetName() == "ignored" {
			t.Error("the hook was called for a parent outside the labelSelector")
		}
	}
}

func TestHookKeysV1AndV2(t *testing.T) {
	ns := env.CreateNamespace(t)
	for _, tc := range []struct {
		version   string
		parentGVR string
		wantKey   string
	}{
		{"v1", "things", "p1-cm"},
		{"v2", "things", ns + "/p1-cm"},
		{"v1", "clusterthings", ns + "/p1-cm"},
		{"v2", "clusterthings", ns + "/p1-cm"},
	} {
		t.Run(tc.version+"-"+tc.parentGVR, func(t *testing.T) {
			gvr, parentNS := thingsGVR, ns
			if tc.parentGVR == "clusterthings" {
				gvr, parentNS = clusterThingsGVR, ""
			}
			hook := newTestHook(t, func(req *syncRequest) any {
				child := configMapChild(req.Parent, "p1-cm", nil)
				child["metadata"].(map[string]any)["namespace"] = ns
				var keys []string
				for k := range req.Children["ConfigMap.v1"] {
					keys = append(keys, k)
				}
				return map[string]any{"children": []any{child}, "status": map[string]any{"keys": keys}}
			})
			startController(t, compositeController(t, hook, gvr, func(spec map[string]any) {
				spec["hooks"].(map[string]any)["sync"].(map[string]any)["version"] = tc.version
			}))
			name := "p1"
			newThing(t, gvr, parentNS, name, nil)
			t.Cleanup(func() {
				_ = env.Dynamic.Resource(gvr).Namespace(parentNS).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			waitFor(t, gvr, parentNS, name, "the child's key in status", func(o *unstructured.Unstructured) bool {
				keys, _, _ := unstructured.NestedStringSlice(o.Object, "status", "keys")
				return len(keys) == 1 && keys[0] == tc.wantKey
			})
		})
	}
}

// TestFailuresChangeNothing establishes children and status with a good
// hook, then makes the hook fail in each way while the parent changes: the
// children and status stay exactly as they were, and the parent gets a
// SyncError Event naming the cause.
func TestFailuresChangeNothing(t *testing.T) {
	cases := []struct {
		name    string
		handler func(h *testHook, parentNS string) func(w http.ResponseWriter, r *http.Request, req *syncRequest)
		closeIt bool
		reason  string
	}{
		{name: "down", closeIt: true, reason: "connect"},
		{name: "timeout", reason: "timeout", handler: func(h *testHook, _ string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
			return func(w http.ResponseWriter, r *http.Request, _ *syncRequest) { <-r.Context().Done() }
		}},
		{name: "500", reason: "500", handler: func(*testHook, string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
			return func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) {
				http.Error(w, "boom", http.StatusInternalServerError)
			}
		}},
		{name: "invalid JSON", reason: "JSON", handler: func(*testHook, string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
			return func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) { _, _ = w.Write([]byte(`{"children": [`)) }
		}},
		{name: "undeclared resource", reason: "not a declared resource", handler: answerWith(func(req *syncRequest, ns string) any {
			return map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "labels": map[string]any{"parent": req.Parent.GetName()}}}}}
		})},
		{name: "other namespace", reason: "differs from the owner's namespace", handler: answerWith(func(req *syncRequest, ns string) any {
			child := configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"value": "changed"})
			child["metadata"].(map[string]any)["namespace"] = "default"
			return map[string]any{"children": []any{child}}
		})},
		{name: "labels outside the selector", reason: "do not match the parent's selector", handler: answerWith(func(req *syncRequest, ns string) any {
			child := configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"value": "changed"})
			child["metadata"].(map[string]any)["labels"] = map[string]any{"parent": "nope"}
			return map[string]any{"children": []any{child}}
		})},
		{name: "100 MiB answer", reason: "exceeds the limit", handler: func(*testHook, string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
			return func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) {
				chunk := make([]byte, 1<<20)
				for i := range chunk {
					chunk[i] = ' '
				}
				_, _ = w.Write([]byte(`{"children": [`))
				for range 100 {
					if _, err := w.Write(chunk); err != nil {
						return // the client stopped reading at its limit
					}
				}
				_, _ = w.Write([]byte(`]}`))
			}
		}},
		{name: "twenty thousand children", reason: "more than the limit", handler: answerWith(func(req *syncRequest, ns string) any {
			children := make([]any, 20000)
			for i := range children {
				children[i] = configMapChild(req.Parent, fmt.Sprintf("c%d", i), nil)
			}
			return map[string]any{"children": children}
		})},
		{name: "the parent as its own child", reason: "not a declared resource", handler: answerWith(func(req *syncRequest, ns string) any {
			return map[string]any{"children": []any{req.Parent.Object}}
		})},
		{name: "invalid child name", reason: "invalid metadata.name", handler: answerWith(func(req *syncRequest, ns string) any {
			return map[string]any{"children": []any{configMapChild(req.Parent, "not/one-segment", nil)}}
		})},
		{name: "status not an object", reason: "status", handler: func(*testHook, string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
			return func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) {
				_, _ = w.Write([]byte(`{"status": "fine", "children": []}`))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, valueHook)
			startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
				// Short for the timeout case; long enough elsewhere for a
				// slow race-detector build to read a huge answer.
				timeout := "10s"
				if tc.name == "timeout" {
					timeout = "300ms"
				}
				spec["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["timeout"] = timeout
			}))
			newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "good"})
			child := waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool { return o != nil && dataValue(o) == "good" })
			parent := waitFor(t, thingsGVR, ns, "p1", "status", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "good" })

			if tc.closeIt {
				hook.server.Close()
			} else {
				hook.setHandler(tc.handler(hook, ns))
			}
			calls := hook.calls.Load()
			setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "changed"})
			waitForEvent(t, ns, "p1", "SyncError", tc.reason)
			if !tc.closeIt {
				testenv.Eventually(t, 30*time.Second, "a retry", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
			}

			after, err := get(t, configMapsGVR, ns, "p1-cm")
			if err != nil {
				t.Fatalf("the child is gone after a failed sync: %v", err)
			}
			if after.GetResourceVersion() != child.GetResourceVersion() {
				t.Errorf("the child was written after a failed sync: %v", after.Object["data"])
			}
			p, _ := get(t, thingsGVR, ns, "p1")
			if statusField(p, "value") != "good" || statusField(p, "observedGeneration") != statusField(parent, "observedGeneration") {
				t.Errorf("the status changed after a failed sync: %v", p.Object["status"])
			}
			if _, err := get(t, secretsGVR, ns, "s"); err == nil {
				t.Error("a child of an undeclared resource was created")
			}
		})
	}
}

func answerWith(f func(req *syncRequest, ns string) any) func(h *testHook, ns string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
	return func(h *testHook, ns string) func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		return func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
			w.Header().Set("Content-Type", "application/json")
			_ = jsonEncode(w, f(req, ns))
		}
	}
}

// TestCreateCostsTheMinimum checks the cost of creating a parent whose
// status counts its children: two hook calls (the second sees the children
// just created, so the status is right at once), three creates, one status
// write, and no sync for the echoes of those writes.
func TestCreateCostsTheMinimum(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		value, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "value")
		var children []any
		for i := range 3 {
			children = append(children, configMapChild(req.Parent, req.Parent.GetName()+"-"+string(rune('a'+i)), map[string]any{"i": value}))
		}
		return map[string]any{"children": children, "status": map[string]any{"children": len(req.Children["ConfigMap.v1"])}}
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	writes := func(verb, target string) float64 {
		return controllertest.Writes(cc.GetName(), verb, target)
	}
	checkWrites := func(phase string, creates, updates, statuses float64) {
		t.Helper()
		for _, w := range []struct {
			verb, target string
			want         float64
		}{{"create", "child", creates}, {"update", "child", updates}, {"patch", "status", statuses}, {"delete", "child", 0}} {
			if got := writes(w.verb, w.target); got != w.want {
				t.Errorf("%s: %s %s writes = %v, want %v", phase, w.verb, w.target, got, w.want)
			}
		}
	}

	// Create: the hook is called with no children (3 creates), with 3
	// children and the status it asked for (children: 0), and once more
	// with the status children: 3, which it answers unchanged: the fixed
	// point. The status is written once.
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "1"})
	waitFor(t, thingsGVR, ns, "p1", "status counts 3 children", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "children") == int64(3)
	})
	if got := hook.calls.Load(); got != 3 {
		t.Errorf("create: hook calls = %d, want 3", got)
	}
	checkWrites("create", 3, 0, 1)

	// Update: 3 children updated, then the fixed point; the status write
	// is observedGeneration's.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "2"})
	waitFor(t, thingsGVR, ns, "p1", "observedGeneration 2", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "observedGeneration") == int64(2)
	})
	if got := hook.calls.Load(); got != 5 {
		t.Errorf("update: hook calls = %d, want 2 more than the create's 3", got)
	}
	checkWrites("update", 3, 3, 2)

	// A change of ours after convergence, whose answer is the fixed point
	// at once: one call, no write.
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the hook to see the label", func(context.Context) (bool, error) {
		last := hook.lastRequest()
		return last != nil && last.Parent.GetLabels()["poke"] == "1", nil
	})
	if got := hook.calls.Load(); got != 6 {
		t.Errorf("label: hook calls = %d, want 1 more than 5", got)
	}
	checkWrites("label", 3, 3, 2)
}

// TestParentReplacedMidSync deletes and re-creates a parent under the same
// name while its first sync waits in the hook: the new parent ends with its
// own child, and nothing is left owned by the old one.
func TestParentReplacedMidSync(t *testing.T) {
	ns := env.CreateNamespace(t)
	release := make(chan struct{})
	var first sync.Once
	hook := newTestHook(t, valueHook)
	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		first.Do(func() { <-release }) // the first sync waits until the parent was replaced
		w.Header().Set("Content-Type", "application/json")
		_ = jsonEncode(w, valueHook(req))
	})
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["timeout"] = "30s"
	}))
	old := newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "old"})
	testenv.Eventually(t, 30*time.Second, "the first hook call", func(context.Context) (bool, error) { return hook.calls.Load() >= 1, nil })
	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, thingsGVR, ns, "p1", "gone", gone)
	replacement := newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "new"})
	close(release)

	waitFor(t, configMapsGVR, ns, "p1-cm", "owned by the new parent with its value", func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.UID == replacement.GetUID() && dataValue(o) == "new"
	})
	waitFor(t, thingsGVR, ns, "p1", "the new parent's status", func(o *unstructured.Unstructured) bool {
		return o.GetUID() == replacement.GetUID() && statusField(o, "value") == "new"
	})
	list, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if ref := metav1.GetControllerOf(&cm); ref != nil && ref.UID == old.GetUID() {
			t.Errorf("%s is still owned by the deleted parent", cm.GetName())
		}
	}
}

// TestRepeatedChildResource: a resource listed twice in childResources
// runs, as in metacontroller, with the later entry's update method, and a
// Warning Event DuplicateResource on the controller says so.
func TestRepeatedChildResource(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		configMaps := func(method string) map[string]any {
			return map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": method}}
		}
		spec["childResources"] = []any{configMaps("OnDelete"), configMaps("InPlace")}
	})
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "a"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool { return o != nil && dataValue(o) == "a" })
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "b"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "updated in place, the later entry's method", func(o *unstructured.Unstructured) bool { return o != nil && dataValue(o) == "b" })
	waitForEvent(t, metav1.NamespaceDefault, cc.GetName(), "DuplicateResource", "spec.childResources[1] lists v1 configmaps again")
}

// TestNameTakenIsReportedAndFreedNameResyncs: a desired child whose name
// another controller's object holds is not created; a Warning Event
// ChildNameTaken on the parent names the holder's controller; and once
// that object is deleted the parent is synced again and the child
// created, with nothing else changing (before, the parent waited
// silently until its next resync).
func TestNameTakenIsReportedAndFreedNameResyncs(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	startController(t, compositeController(t, hook, thingsGVR, nil))
	owner, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "other-owner"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "p1-cm"}, "data": map[string]any{"value": "theirs"}}}
	holder.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(owner, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), holder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "mine"})
	waitForEvent(t, ns, "p1", "ChildNameTaken", "ConfigMap p1-cm is not created: an object of that name is controlled by ConfigMap other-owner")
	if cm, err := get(t, configMapsGVR, ns, "p1-cm"); err != nil || dataValue(cm) != "theirs" {
		t.Fatalf("the holder: %v, %v; want it untouched", cm, err)
	}
	if err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Delete(ctx(t), "p1-cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "p1-cm", "created once the name is free", func(o *unstructured.Unstructured) bool {
		return o != nil && dataValue(o) == "mine"
	})
}
