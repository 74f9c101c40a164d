//go:build integration

package composite_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestAnswerWithoutChildrenIsRefused establishes a child and a status, then
// makes the hook answer without a children list while the parent changes:
// with a misspelt key (the typo of issue 14), and with no key at all. The
// answer is refused with a SyncError saying what to answer
// instead; the child and the status stay exactly as they were; a misspelt
// key is also reported, with the key it most likely misspells.
func TestAnswerWithoutChildrenIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(req *syncRequest) any
		typo   bool
	}{
		{"typo", func(req *syncRequest) any {
			return map[string]any{
				"status":   map[string]any{"value": "changed"},
				"childern": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"value": "changed"})},
			}
		}, true},
		{"no children key", func(req *syncRequest) any {
			return map[string]any{"status": map[string]any{"value": "changed"}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, valueHook)
			cc := compositeController(t, hook, thingsGVR, nil)
			startController(t, cc)
			newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "good"})
			child := waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool { return o != nil && dataValue(o) == "good" })
			parent := waitFor(t, thingsGVR, ns, "p1", "status", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "good" })

			hook.answer(tc.answer)
			calls := hook.calls.Load()
			setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "changed"})
			msg := controllertest.EventMessage(t, env, ns, "p1", "SyncError", `answers "children": []`)
			for _, want := range []string{
				"compositecontroller " + cc.GetName() + `: sync hook answer refused: it has no "children" list`,
				"would delete all its children (1)",
				engine.AbsentChildrenAnnotation + "=empty",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("SyncError %q does not say %q", msg, want)
				}
			}
			if n := strings.Count(msg, cc.GetName()); n != 1 {
				t.Errorf("SyncError %q names the controller %d times, want once", msg, n)
			}
			if tc.typo {
				unknown := controllertest.EventMessage(t, env, ns, "p1", "UnknownAnswerField", `"childern"`)
				want := "compositecontroller " + cc.GetName() + `: the sync hook answered with unknown key "childern" (did you mean "children"?)`
				if !strings.HasPrefix(unknown, want) {
					t.Errorf("UnknownAnswerField %q, want it to start with %q", unknown, want)
				}
				if !strings.Contains(msg, `(it has "childern" (did you mean "children"?))`) {
					t.Errorf("SyncError %q does not name the misspelt key", msg)
				}
			}
			testenv.Eventually(t, 30*time.Second, "a retry", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })

			after, err := get(t, configMapsGVR, ns, "p1-cm")
			if err != nil {
				t.Fatalf("the child is gone after a refused answer: %v", err)
			}
			if after.GetResourceVersion() != child.GetResourceVersion() {
				t.Errorf("the child was written after a refused answer: %v", after.Object["data"])
			}
			p, _ := get(t, thingsGVR, ns, "p1")
			if statusField(p, "value") != "good" || statusField(p, "observedGeneration") != statusField(parent, "observedGeneration") {
				t.Errorf("the status changed after a refused answer: %v", p.Object["status"])
			}
		})
	}
}

// TestEmptyChildrenDeletes: "children": [] is the way to delete them all;
// so is "children": null, which is how a Go hook's nil slice encodes.
func TestEmptyChildrenDeletes(t *testing.T) {
	for name, children := range map[string]any{"empty": []any{}, "null": nil} {
		t.Run(name, func(t *testing.T) {
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, valueHook)
			startController(t, compositeController(t, hook, thingsGVR, nil))
			newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "good"})
			waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)

			hook.answer(func(*syncRequest) any {
				return map[string]any{"status": map[string]any{"value": "none"}, "children": children}
			})
			setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "none"})
			waitFor(t, configMapsGVR, ns, "p1-cm", "deleted", gone)
			waitFor(t, thingsGVR, ns, "p1", "status", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "none" })
		})
	}
}

// TestAbsentChildrenAnnotation: with metactl.io/absent-children=empty an
// answer without children means no children, as in metacontroller: the
// child is deleted, even though the key is misspelt (which is still
// reported).
func TestAbsentChildrenAnnotation(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	cc.SetAnnotations(map[string]string{engine.AbsentChildrenAnnotation: engine.AbsentListEmpty})
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "good"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)

	hook.answer(func(req *syncRequest) any {
		return map[string]any{
			"status":   map[string]any{"value": "gone"},
			"childern": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", nil)},
		}
	})
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "gone"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "deleted", gone)
	waitFor(t, thingsGVR, ns, "p1", "status", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "gone" })
	controllertest.EventMessage(t, env, ns, "p1", "UnknownAnswerField", `"childern" (did you mean "children"?)`)
}

// TestAbsentChildrenAnnotationAddedLater: the annotation counts from the
// moment it is set on the CompositeController, without a restart: the
// refused parent is synced again with backoff, and its child then deleted.
func TestAbsentChildrenAnnotationAddedLater(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"status": map[string]any{"value": "x"}}
	})
	object := compositeController(t, hook, thingsGVR, nil)
	unstructured.RemoveNestedField(object.Object, "metadata", "uid")
	unstructured.RemoveNestedField(object.Object, "metadata", "generation")
	created, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx(t), object, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	})
	startController(t, created)

	// A child the hook did not ask for, adopted by the parent: the hook's
	// answer without children would delete it.
	p := newThing(t, thingsGVR, ns, "p1", nil)
	orphan := configMapChild(p, "p1-orphan", map[string]any{"value": "x"})
	orphan["metadata"].(map[string]any)["namespace"] = ns
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), &unstructured.Unstructured{Object: orphan}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllertest.EventMessage(t, env, ns, "p1", "SyncError", "sync hook answer refused")
	if _, err := get(t, configMapsGVR, ns, "p1-orphan"); err != nil {
		t.Fatalf("the child is gone after a refused answer: %v", err)
	}

	patch := `{"metadata":{"annotations":{"` + engine.AbsentChildrenAnnotation + `":"empty"}}}`
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Patch(ctx(t), created.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// A change of the parent syncs it now rather than after the backoff.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "poke"})
	waitFor(t, configMapsGVR, ns, "p1-orphan", "deleted", gone)
}

// TestHookCrashIsReported: a hook that closes the connection without
// answering is reported as such, naming the controller once.
func TestHookCrashIsReported(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "good"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)

	hook.setHandler(func(w http.ResponseWriter, r *http.Request, _ *syncRequest) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "changed"})
	msg := controllertest.EventMessage(t, env, ns, "p1", "SyncError", "closed the connection")
	want := "compositecontroller " + cc.GetName() + ": sync hook " + hook.server.URL + "/sync: the hook closed the connection without answering (did it crash?) (retrying in "
	if !strings.HasPrefix(msg, want) {
		t.Errorf("SyncError %q, want one starting %q", msg, want)
	}
}

// TestRollingAnswerWithoutChildrenIsRefused: under a rolling update, an
// answer without children, for any revision, is refused too: no child is
// deleted or moved.
func TestRollingAnswerWithoutChildrenIsRefused(t *testing.T) {
	ns, hook := rolledOutOnV1(t, "RollingRecreate")
	_, before := versions(t, ns)
	hook.answer(func(req *syncRequest) any {
		if v, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version"); v == "v1" {
			// The old revision's answer has lost its children key.
			return map[string]any{"status": map[string]any{"version": "v1"}}
		}
		return rollingHook(req)
	})
	calls := hook.calls.Load()
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	controllertest.EventMessage(t, env, ns, "p1", "SyncError", `sync hook answer refused: it has no "children" list`)
	testenv.Eventually(t, 30*time.Second, "retries", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+4, nil })
	v, after := versions(t, ns)
	if countVersion(v, "v1") != 3 {
		t.Errorf("children changed although an answer was refused: %v", v)
	}
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("child %s was replaced although an answer was refused", name)
		}
	}
}

// TestLaterRoundWithoutChildrenIsRefused: within one sync, an answer of a
// later round without children is refused, and the answer before it stays
// in force: its child is kept and its status written.
func TestLaterRoundWithoutChildrenIsRefused(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		if len(req.Children["ConfigMap.v1"]) == 0 {
			return map[string]any{
				"status":   map[string]any{"phase": "one"},
				"children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", nil)},
			}
		}
		return map[string]any{"status": map[string]any{"phase": "two"}}
	})
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", nil)
	controllertest.EventMessage(t, env, ns, "p1", "SyncError", "sync hook answer refused")
	waitFor(t, thingsGVR, ns, "p1", "the first answer's status", func(o *unstructured.Unstructured) bool { return statusField(o, "phase") == "one" })
	calls := hook.calls.Load()
	testenv.Eventually(t, 30*time.Second, "retries", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
	if _, err := get(t, configMapsGVR, ns, "p1-cm"); err != nil {
		t.Errorf("the first answer's child is gone: %v", err)
	}
	if p, _ := get(t, thingsGVR, ns, "p1"); statusField(p, "phase") != "one" {
		t.Errorf("status %v, want the first answer's", p.Object["status"])
	}
}

// TestMisspeltListOnANewParent: a new parent (no children yet) whose hook
// answers "childern" is told as a parent with children is: the answer is
// refused, with a SyncError Event and Synced=False InvalidAnswer naming the
// key, not left Pending with only a Warning.
func TestMisspeltListOnANewParent(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{
			"status":   map[string]any{"value": "new"},
			"childern": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", nil)},
		}
	})
	startController(t, optIn(isolated(compositeController(t, hook, thingsGVR, nil), ns), "true"))
	newParent(t, ns, "p1", nil)
	msg := controllertest.EventMessage(t, env, ns, "p1", "SyncError", `likely misspells it`)
	if !strings.Contains(msg, `(it has "childern" (did you mean "children"?))`) {
		t.Errorf("SyncError %q does not name the misspelt key", msg)
	}
	obj := waitFor(t, thingsGVR, ns, "p1", "Synced=False "+engine.ReasonInvalidAnswer, hasSynced("False", engine.ReasonInvalidAnswer))
	if statusField(obj, "value") == "new" {
		t.Errorf("the refused answer's status was written: %v", obj.Object["status"])
	}
}
