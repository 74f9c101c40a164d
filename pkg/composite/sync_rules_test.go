package composite

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/status"
)

// The fast tests of whole syncs (no API server): the Engine syncs one
// parent (SyncOnce) of a CompositeController built by New, whose hook is
// in-process and whose writes go to internal/inmemory's store
// (ruletest.Cluster). Their twins against kube-apiserver are the tagged
// tests of this package (composite_test.go and others).

// syncCluster starts (StartCaches) the controller of a CompositeController
// of parents of parent (things: nil) and their configmaps (InPlace), whose
// sync hook is h, then edit, on a cluster holding objs; the controller
// stops when the test ends.
func syncCluster(t *testing.T, h *ruletest.Hook, parent *schema.GroupVersionResource, edit func(spec map[string]any), annotations map[string]string, objs ...*unstructured.Unstructured) (*Controller, *ruletest.Cluster) {
	t.Helper()
	cluster := ruletest.NewCluster(ruleResources(t), []schema.GroupVersionResource{ruleThings}, objs...)
	return startSync(t, cluster, h, parent, edit, annotations), cluster
}

// startSync is syncCluster on a cluster already made.
func startSync(t *testing.T, cluster *ruletest.Cluster, h *ruletest.Hook, parent *schema.GroupVersionResource, edit func(spec map[string]any), annotations map[string]string) *Controller {
	t.Helper()
	if parent == nil {
		parent = &ruleThings
	}
	cc := ruleCompositeController(*parent, "InPlace", func(spec map[string]any) {
		spec["hooks"] = map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.URL + "/sync", "timeout": "5s"}}}
		if edit != nil {
			edit(spec)
		}
	})
	cc.SetAnnotations(annotations)
	c, err := New(t.Context(), cc, cluster.Options)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ruletest.StartCaches(t, c)
	return c
}

// syncParent is the parent ns/p: a Thing whose spec.selector selects
// parent=p, with status {"old": true}.
func syncParent(finalizers ...string) *unstructured.Unstructured {
	p := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
	p.SetGeneration(3)
	p.SetFinalizers(finalizers)
	p.Object["spec"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "p"}}}
	p.Object["status"] = map[string]any{"old": true}
	return p
}

// syncChild is a ConfigMap ns/<name> labelled parent=p with data.v=value,
// a child of owner (nil: an orphan).
func syncChild(name, value string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	cm := inmemory.Object("v1", "ConfigMap", "ns", name, map[string]string{"parent": "p"}, nil)
	cm.Object["data"] = map[string]any{"v": value}
	if owner != nil {
		cm.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(),
			Name: owner.GetName(), UID: owner.GetUID(), Controller: new(true), BlockOwnerDeletion: new(true)}})
	}
	return cm
}

// answerChild is a child in a hook's answer: ConfigMap <name> with data.v.
func answerChild(name, value string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"parent": "p"}}, "data": map[string]any{"v": value}}
}

// stored returns the object of gvr ns/name in the cluster's store, nil
// when there is none.
func stored(c *ruletest.Cluster, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	obj, _ := c.Objects.Get(gvr, "ns", name)
	return obj
}

// controlledBy reports whether obj's controller is the object of uid.
func controlledBy(obj *unstructured.Unstructured, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
}

// TestSyncWritesChildrenAndStatus: one sync makes the parent's children
// what the hook answers (a new one created, owned by the parent; a
// changed one updated; one no longer answered deleted) and writes the
// status it answers, with observedGeneration, through the status
// subresource; the hook is given the parent and its children.
func TestSyncWritesChildrenAndStatus(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(req map[string]any) any {
		observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		return map[string]any{"status": map[string]any{"observed": len(observed)},
			"children": []any{answerChild("keep", "new"), answerChild("add", "a")}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent, syncChild("keep", "old", parent), syncChild("drop", "x", parent))
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if got := h.Requests()[0]["parent"].(map[string]any)["metadata"].(map[string]any)["name"]; got != "p" {
		t.Errorf("the hook was given parent %v, want p", got)
	}
	add := stored(cluster, ruleConfigMaps, "add")
	switch {
	case add == nil:
		t.Fatalf("child add was not created; writes %v", cluster.Writes())
	case !controlledBy(add, parent.GetUID()):
		t.Errorf("child add has owners %v, want the parent as controller", add.GetOwnerReferences())
	}
	if keep := stored(cluster, ruleConfigMaps, "keep"); keep == nil || keep.Object["data"].(map[string]any)["v"] != "new" {
		t.Errorf("child keep is %v, want data.v updated to new", keep)
	}
	if drop := stored(cluster, ruleConfigMaps, "drop"); drop != nil {
		t.Errorf("child drop is still there; writes %v", cluster.Writes())
	}
	got := stored(cluster, ruleThings, "p")
	want := map[string]any{"observed": int64(2), "observedGeneration": int64(3)}
	if have, _ := got.Object["status"].(map[string]any); !status.Equal(have, want) {
		t.Errorf("parent status %v, want %v", have, want)
	}
	if !slices.Contains(cluster.Writes(), "patch things/status ns/p") {
		t.Errorf("writes %v, want the status written through its subresource", cluster.Writes())
	}
}

// TestRefusedAnswerWritesNothing: an answer whose children the sync
// refuses (a kind that is not a child resource) fails the sync and
// writes nothing: neither the children it does declare nor the status.
func TestRefusedAnswerWritesNothing(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"status": map[string]any{"n": 1}, "children": []any{
			answerChild("fine", "v"),
			map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}},
		}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, "Secret")
}

// TestHookFailureLeavesChildrenAndStatus: a sync whose hook fails writes
// neither children nor status; with the Synced condition on, that
// condition alone is written (False, its reason HookFailed or the like,
// the status the hook answered before kept), and a SyncError Event is
// recorded on the parent.
func TestHookFailureLeavesChildrenAndStatus(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return ruletest.HTTPError(500) })
	c, cluster := syncCluster(t, h, nil, nil, map[string]string{engine.SyncedConditionAnnotation: "true"},
		parent, syncChild("keep", "old", parent))
	if _, err := c.SyncOnce(t.Context(), parent); err == nil {
		t.Fatal("SyncOnce of a failing hook did not fail")
	}
	for _, w := range cluster.Writes() {
		if !strings.HasPrefix(w, "patch things/status ns/p") {
			t.Errorf("a failed hook call wrote %s", w)
		}
	}
	if keep := stored(cluster, ruleConfigMaps, "keep"); keep == nil || keep.GetResourceVersion() != "1" {
		t.Errorf("child keep is %v, want it untouched", keep)
	}
	status, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any)
	if status["old"] != true {
		t.Errorf("status %v lost what the hook answered before", status)
	}
	conditions, _ := status["conditions"].([]any)
	if len(conditions) != 1 || conditions[0].(map[string]any)["type"] != engine.SyncedConditionType ||
		conditions[0].(map[string]any)["status"] != "False" {
		t.Errorf("conditions %v, want %s False", conditions, engine.SyncedConditionType)
	}
	if events := cluster.Events(); !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, engine.ReasonSyncError) }) {
		t.Errorf("events %v, want a %s", events, engine.ReasonSyncError)
	}
}

// TestFinalizeHookFlow: with a finalize hook, a live parent gets the
// controller's finalizer at its sync; a parent being deleted is given to
// the finalize hook (finalizing: true), keeps the finalizer while the
// hook answers finalized: false, and is gone once it answers true (the
// finalizer removed, nothing else holds it).
func TestFinalizeHookFlow(t *testing.T) {
	finalizer := finalizerPrefix + "rules"
	withFinalize := func(h *ruletest.Hook) func(spec map[string]any) {
		return func(spec map[string]any) {
			spec["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": h.URL + "/finalize", "timeout": "5s"}}
		}
	}
	t.Run("a live parent gets the finalizer", func(t *testing.T) {
		parent := syncParent()
		h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}} })
		c, cluster := syncCluster(t, h, nil, withFinalize(h), nil, parent)
		if _, err := c.SyncOnce(t.Context(), parent); err != nil {
			t.Fatalf("SyncOnce: %v", err)
		}
		if got := stored(cluster, ruleThings, "p").GetFinalizers(); !slices.Contains(got, finalizer) {
			t.Errorf("finalizers %v, want %s", got, finalizer)
		}
	})
	for _, finalized := range []bool{false, true} {
		name := map[bool]string{false: "not finalized: the finalizer stays", true: "finalized: the parent is gone"}[finalized]
		t.Run(name, func(t *testing.T) {
			parent := syncParent(finalizer)
			h := ruletest.NewHook(t, func(req map[string]any) any {
				return map[string]any{"children": []any{}, "finalized": req["finalizing"] == true && finalized}
			})
			c, cluster := syncCluster(t, h, nil, withFinalize(h), nil, parent)
			// Deleted in the store; the cache's copy is the one before.
			if _, err := cluster.Objects.Delete(t.Context(), ruleThings, "ns", "p", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deleting := stored(cluster, ruleThings, "p")
			if _, err := c.SyncOnce(t.Context(), deleting); err != nil {
				t.Fatalf("SyncOnce: %v", err)
			}
			if r := h.Requests(); len(r) == 0 || r[0]["finalizing"] != true {
				t.Fatalf("%d hook calls, none the finalize hook's with finalizing", len(r))
			}
			got := stored(cluster, ruleThings, "p")
			if finalized && got != nil {
				t.Errorf("the parent is still there, finalizers %v", got.GetFinalizers())
			}
			if !finalized && (got == nil || !slices.Contains(got.GetFinalizers(), finalizer)) {
				t.Errorf("the parent lost its finalizer: %v", got)
			}
		})
	}
}

// TestSyncAdoptsAndReleasesOrphans: a sync adopts the orphans its
// parent's selector matches (each gets the parent as controller, and is
// a child the hook is given) and releases the children that stopped
// matching (their owner reference removed, the child left in place).
func TestSyncAdoptsAndReleasesOrphans(t *testing.T) {
	parent := syncParent()
	orphan := syncChild("orphan", "o", nil)
	strayed := syncChild("strayed", "s", parent)
	strayed.SetLabels(map[string]string{"parent": "someone-else"})
	other := syncChild("other", "x", nil)
	other.SetLabels(map[string]string{"parent": "q"})
	h := ruletest.NewHook(t, func(req map[string]any) any {
		observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		var answer []any
		for key := range observed {
			answer = append(answer, answerChild(key, "o"))
		}
		return map[string]any{"children": answer}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent, orphan, strayed, other)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	observed := h.Requests()[0]["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
	if _, ok := observed["orphan"]; !ok || len(observed) != 1 {
		t.Errorf("the hook was given children %v, want the adopted orphan alone", observed)
	}
	if got := stored(cluster, ruleConfigMaps, "orphan"); got == nil || !controlledBy(got, parent.GetUID()) {
		t.Errorf("orphan %v was not adopted", got)
	}
	if got := stored(cluster, ruleConfigMaps, "strayed"); got == nil || len(got.GetOwnerReferences()) != 0 {
		t.Errorf("strayed %v was not released", got)
	}
	if got := stored(cluster, ruleConfigMaps, "other"); got == nil || len(got.GetOwnerReferences()) != 0 {
		t.Errorf("other, of another selector, is %v: adopted or deleted", got)
	}
}

// withMethod sets the update method of the configmaps.
func withMethod(method string) func(spec map[string]any) {
	return func(spec map[string]any) {
		spec["childResources"].([]any)[0].(map[string]any)["updateStrategy"] = map[string]any{"method": method}
	}
}

// answerKeepAndAdd answers children keep (data.v new) and add.
func answerKeepAndAdd(map[string]any) any {
	return map[string]any{"children": []any{answerChild("keep", "new"), answerChild("add", "a")}}
}

// TestOnDeleteLeavesChangedChildren: with OnDelete, a child that differs
// from the answer is left as it is, while a missing one is created.
func TestOnDeleteLeavesChangedChildren(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, answerKeepAndAdd)
	c, cluster := syncCluster(t, h, nil, withMethod("OnDelete"), nil, parent, syncChild("keep", "old", parent))
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if keep := stored(cluster, ruleConfigMaps, "keep"); keep == nil || keep.GetResourceVersion() != "1" {
		t.Errorf("child keep is %v, want it untouched", keep)
	}
	if stored(cluster, ruleConfigMaps, "add") == nil {
		t.Errorf("child add was not created; writes %v", cluster.Writes())
	}
}

// TestRecreateDeletesAChangedChild: with Recreate, a child that differs
// from the answer is deleted (a later sync creates it anew), not updated.
func TestRecreateDeletesAChangedChild(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, answerKeepAndAdd)
	c, cluster := syncCluster(t, h, nil, withMethod("Recreate"), nil, parent, syncChild("keep", "old", parent))
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if keep := stored(cluster, ruleConfigMaps, "keep"); keep != nil && keep.GetUID() == "uid-ns/keep" {
		t.Errorf("child keep is %v, want it deleted; writes %v", keep, cluster.Writes())
	}
	if slices.Contains(cluster.Writes(), "update configmaps ns/keep") {
		t.Errorf("writes %v: keep was updated", cluster.Writes())
	}
}

// TestAnswerWithoutChildrenListIsRefused: an answer with no "children"
// list is refused (it would delete every child): nothing is written,
// and the SyncError says how to ask for that.
func TestAnswerWithoutChildrenListIsRefused(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"status": map[string]any{"n": 1}} })
	c, cluster := syncCluster(t, h, nil, nil, nil, parent, syncChild("keep", "old", parent))
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, `no "children" list`)
}

// TestSameStatusIsNotWritten: a status the parent already has (numbers
// compared by value) is not written again.
func TestSameStatusIsNotWritten(t *testing.T) {
	parent := syncParent()
	parent.Object["status"] = map[string]any{"n": int64(1), "observedGeneration": int64(3)}
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"n": 1.0}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if w := cluster.Writes(); len(w) > 0 {
		t.Errorf("an unchanged status was written: %v", w)
	}
}

// TestStatusWithoutSubresource: a parent whose resource has no status
// subresource gets its status by a patch of the object itself.
func TestStatusWithoutSubresource(t *testing.T) {
	parent := inmemory.Object("test.metactl.io/v1", "PlainThing", "ns", "p", nil, nil)
	parent.Object["spec"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "p"}}}
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"ok": true}}
	})
	c, cluster := syncCluster(t, h, &rulePlainThings, nil, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	got, _ := cluster.Objects.Get(rulePlainThings, "ns", "p")
	if got == nil || got.Object["status"] == nil || got.Object["status"].(map[string]any)["ok"] != true {
		t.Errorf("parent %v, want status.ok", got)
	}
	if w := cluster.Writes(); !slices.Equal(w, []string{"patch plainthings ns/p"}) {
		t.Errorf("writes %v, want one patch of the object", w)
	}
}

// TestConfigMapParentKeepsStatusInAnnotation: a built-in parent (a
// ConfigMap, no status) keeps the hook's status in StatusAnnotation.
func TestConfigMapParentKeepsStatusInAnnotation(t *testing.T) {
	parent := inmemory.Object("v1", "ConfigMap", "ns", "p", nil, nil)
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"step": "two"}}
	})
	c, cluster := syncCluster(t, h, &ruleConfigMaps, func(spec map[string]any) {
		spec["generateSelector"] = true
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}
	}, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	got := stored(cluster, ruleConfigMaps, "p")
	if a := got.GetAnnotations()[engine.StatusAnnotation]; !strings.Contains(a, `"step":"two"`) {
		t.Errorf("annotation %s = %q, want the status", engine.StatusAnnotation, a)
	}
	if got.Object["status"] != nil {
		t.Errorf("the ConfigMap got a .status: %v", got.Object["status"])
	}
}

// TestGeneratedSelectorLabelsChildren: with generateSelector, a child
// gets the controller-uid label of its parent.
func TestGeneratedSelectorLabelsChildren(t *testing.T) {
	parent := syncParent()
	parent.Object["spec"] = map[string]any{}
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}}
	})
	c, cluster := syncCluster(t, h, nil, func(spec map[string]any) { spec["generateSelector"] = true }, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if child := stored(cluster, ruleConfigMaps, "c"); child == nil || child.GetLabels()[ControllerUIDLabel] != string(parent.GetUID()) {
		t.Errorf("child %v, want label %s=%s", child, ControllerUIDLabel, parent.GetUID())
	}
}

// TestChildInAnotherNamespaceIsRefused: a child the hook puts in
// another namespace than its namespaced parent's refuses the answer
// whole: nothing is written.
func TestChildInAnotherNamespaceIsRefused(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any {
		forged := answerChild("forged", "x")
		forged["metadata"].(map[string]any)["namespace"] = "other"
		return map[string]any{"children": []any{answerChild("fine", "v"), forged}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, "namespace")
}

// TestAnswerEventsAreRecorded: the Events an answer asks for are
// recorded on the parent (no type: Normal), once per sync although the
// rounds call the hook more than once.
func TestAnswerEventsAreRecorded(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(req map[string]any) any {
		observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		return map[string]any{"children": []any{answerChild("c", "v")}, "status": map[string]any{"n": len(observed)},
			"events": []any{
				map[string]any{"type": "Warning", "reason": "BackupFailed", "message": "disk full"},
				map[string]any{"reason": "Called", "message": "hello"},
			}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if len(h.Requests()) < 2 {
		t.Fatalf("%d hook calls, want the rounds to call it again after the child's write", len(h.Requests()))
	}
	events := cluster.Events()
	want := []string{"Warning BackupFailed disk full", "Normal Called hello"}
	if !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

// TestSyncedConditionAfterASync: with the Synced condition on, a
// successful sync writes it True along with the hook's status.
func TestSyncedConditionAfterASync(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"mine": "yes"}}
	})
	c, cluster := syncCluster(t, h, nil, nil, map[string]string{engine.SyncedConditionAnnotation: "true"}, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	status, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any)
	conditions, _ := status["conditions"].([]any)
	if status["mine"] != "yes" || len(conditions) != 1 || conditions[0].(map[string]any)["type"] != engine.SyncedConditionType ||
		conditions[0].(map[string]any)["status"] != "True" {
		t.Errorf("status %v, want the hook's and %s True", status, engine.SyncedConditionType)
	}
}

// hasEvent reports whether events has one of reason.
func hasEvent(events []string, reason string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, " "+reason+" ") })
}

// TestInvalidEventRefusesTheWholeAnswer: an answer with an Event of an
// invalid type is refused whole: no child, no status, none of its
// Events; the sync fails with what is wrong.
func TestInvalidEventRefusesTheWholeAnswer(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{answerChild("c", "v")}, "status": map[string]any{"n": 1},
			"events": []any{map[string]any{"reason": "Fine"}, map[string]any{"type": "Warn", "reason": "Broken"}}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, `events[1].type "Warn": must be Normal or Warning`)
	if events := cluster.Events(); hasEvent(events, "Fine") {
		t.Errorf("events %v: the refused answer's Event was recorded", events)
	}
}

// TestConditionTimesKeptUntilTheStatusChanges: a condition the hook answers
// without lastTransitionTime keeps the time the parent's condition of its
// type has while its status stays, gets now when its status changes (or
// it is new), and gets the parent's generation as observedGeneration
// unless the hook gives one.
func TestConditionTimesKeptUntilTheStatusChanges(t *testing.T) {
	const old = "2020-01-01T00:00:00Z"
	for _, ready := range []string{"True", "False"} {
		t.Run("Ready "+ready, func(t *testing.T) {
			parent := syncParent()
			parent.Object["status"] = map[string]any{"conditions": []any{
				map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": old}}}
			h := ruletest.NewHook(t, func(map[string]any) any {
				return map[string]any{"children": []any{}, "status": map[string]any{"conditions": []any{
					map[string]any{"type": "Ready", "status": ready, "reason": "Checked"},
					map[string]any{"type": "Custom", "status": "True", "observedGeneration": 7},
				}}}
			})
			c, cluster := syncCluster(t, h, nil, nil, nil, parent)
			before := time.Now().UTC().Truncate(time.Second)
			if _, err := c.SyncOnce(t.Context(), parent); err != nil {
				t.Fatalf("SyncOnce: %v", err)
			}
			conditions := map[string]map[string]any{}
			st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any)
			for _, c := range st["conditions"].([]any) {
				conditions[c.(map[string]any)["type"].(string)] = c.(map[string]any)
			}
			r := conditions["Ready"]
			at, err := time.Parse(time.RFC3339, fmt.Sprint(r["lastTransitionTime"]))
			switch {
			case r["reason"] != "Checked" || r["observedGeneration"] != int64(3):
				t.Errorf("Ready = %v, want the hook's reason and observedGeneration 3", r)
			case ready == "True" && r["lastTransitionTime"] != old:
				t.Errorf("Ready = %v, want the time it had (%s)", r, old)
			case ready == "False" && (err != nil || at.Before(before)):
				t.Errorf("Ready = %v after it flipped, want lastTransitionTime now", r)
			}
			if cu := conditions["Custom"]; cu["observedGeneration"] != int64(7) || cu["lastTransitionTime"] == nil {
				t.Errorf("Custom = %v, want the hook's observedGeneration 7 and a lastTransitionTime", cu)
			}
		})
	}
}

// TestFinalizeHookSeesChildrenBeingDeleted: while a finalize hook's
// children are deleted but held by their finalizers, the next round gives
// them to the hook with their deletionTimestamp, and the parent keeps its
// finalizer as long as the hook does not answer finalized.
func TestFinalizeHookSeesChildrenBeingDeleted(t *testing.T) {
	finalizer := finalizerPrefix + "rules"
	parent := syncParent(finalizer)
	child := syncChild("held", "v", parent)
	child.SetFinalizers([]string{"example.com/hold"})
	h := ruletest.NewHook(t, func(req map[string]any) any {
		observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		return map[string]any{"children": []any{}, "finalized": len(observed) == 0}
	})
	c, cluster := syncCluster(t, h, nil, func(spec map[string]any) {
		spec["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": h.URL + "/finalize", "timeout": "5s"}}
	}, nil, parent, child)
	if _, err := cluster.Objects.Delete(t.Context(), ruleThings, "ns", "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SyncOnce(t.Context(), stored(cluster, ruleThings, "p")); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	seen := false
	for _, req := range h.Requests() {
		held, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)["held"].(map[string]any)
		if held == nil {
			t.Fatal("a finalize call saw no children while its ConfigMap was still there")
		}
		seen = seen || held["metadata"].(map[string]any)["deletionTimestamp"] != nil
	}
	if !seen {
		t.Errorf("no finalize call saw the child being deleted; writes %v", cluster.Writes())
	}
	if p := stored(cluster, ruleThings, "p"); p == nil || !slices.Contains(p.GetFinalizers(), finalizer) {
		t.Errorf("the parent is %v: gone or without its finalizer while its child is being deleted", p)
	}
}

// TestSelectorByAbsenceOnlyFailsTheSync: a parent whose selector matches
// by the absence of labels only fails its sync before any hook call; the
// orphans it would match are left alone.
func TestSelectorByAbsenceOnlyFailsTheSync(t *testing.T) {
	parent := syncParent()
	parent.Object["spec"] = map[string]any{"selector": map[string]any{"matchExpressions": []any{
		map[string]any{"key": "nope", "operator": "DoesNotExist"}}}}
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}} })
	c, cluster := syncCluster(t, h, nil, nil, nil, parent, syncChild("orphan", "o", nil))
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, "absence of labels only")
	if n := len(h.Requests()); n != 0 {
		t.Errorf("the hook was called %d times", n)
	}
}

// TestStatusAnnotationTooLargeIsRefused: a built-in parent's status that
// would not fit StatusAnnotation fails the sync and leaves the annotation
// as it was; the answer's children are written.
func TestStatusAnnotationTooLargeIsRefused(t *testing.T) {
	parent := inmemory.Object("v1", "ConfigMap", "ns", "p", nil, map[string]string{engine.StatusAnnotation: `{"size":"small"}`})
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"status": map[string]any{"blob": strings.Repeat("x", engine.MaxStatusAnnotationBytes)},
			"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}}}
	})
	c, cluster := syncCluster(t, h, &ruleConfigMaps, func(spec map[string]any) {
		spec["generateSelector"] = true
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}
	}, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err == nil || !strings.Contains(err.Error(), "more than the 65536 bytes") {
		t.Errorf("SyncOnce: %v, want the refusal of the status's size", err)
	}
	if a := stored(cluster, ruleConfigMaps, "p").GetAnnotations()[engine.StatusAnnotation]; a != `{"size":"small"}` {
		t.Errorf("annotation %s = %.40q, want the previous status kept", engine.StatusAnnotation, a)
	}
	if s, _ := cluster.Objects.Get(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "ns", "s"); s == nil {
		t.Errorf("the answer's child was not written; writes %v", cluster.Writes())
	}
}

// withCustomize adds a customize hook at customize.
func withCustomize(customize *ruletest.Hook) func(spec map[string]any) {
	return func(spec map[string]any) {
		spec["hooks"].(map[string]any)["customize"] = map[string]any{"webhook": map[string]any{"url": customize.URL + "/customize", "timeout": "5s"}}
	}
}

// feedsOf is the customize hook's answer: the ConfigMaps labelled
// feeds=<parent's name>.
func feedsOf(req map[string]any) any {
	name := req["parent"].(map[string]any)["metadata"].(map[string]any)["name"]
	return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"feeds": name}}}}}
}

// feed is the ConfigMap ns/<name> labelled feeds=<parent>.
func feed(name, parent string) *unstructured.Unstructured {
	return inmemory.Object("v1", "ConfigMap", "ns", name, map[string]string{"feeds": parent}, nil)
}

// TestRelatedObjectsAreGivenToTheSyncHook: the objects the customize
// hook's rules select (a label selector) are given to the sync hook, in
// "related", and no others.
func TestRelatedObjectsAreGivenToTheSyncHook(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}} })
	customize := ruletest.NewHook(t, feedsOf)
	c, _ := syncCluster(t, h, nil, withCustomize(customize), nil, parent, feed("feed-1", "p"), feed("other", "q"))
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	related, _ := h.Requests()[0]["related"].(map[string]any)["ConfigMap.v1"].(map[string]any)
	if _, ok := related["feed-1"]; !ok || len(related) != 1 {
		t.Errorf("related %v, want feed-1 alone", related)
	}
}

// TestInvalidCustomizeAnswerWritesNothing: a customize answer whose rule
// is invalid (names with a label selector) fails the sync before the sync
// hook: nothing is written.
func TestInvalidCustomizeAnswerWritesNothing(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}, "status": map[string]any{"n": 1}} })
	customize := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"names": []any{"x"}, "labelSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}}
	})
	c, cluster := syncCluster(t, h, nil, withCustomize(customize), nil, parent)
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, "names cannot be combined")
	if n := len(h.Requests()); n != 0 {
		t.Errorf("the sync hook was called %d times", n)
	}
}

// TestTooManyRelatedObjectsFailsTheSync: rules that select more related
// objects than Options.MaxRelatedObjects fail the sync, naming the rule,
// the count and the flag, before the sync hook.
func TestTooManyRelatedObjectsFailsTheSync(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}} })
	customize := ruletest.NewHook(t, feedsOf)
	cluster := ruletest.NewCluster(ruleResources(t), []schema.GroupVersionResource{ruleThings},
		parent, feed("feed-1", "p"), feed("feed-2", "p"), feed("feed-3", "p"))
	cluster.Options.MaxRelatedObjects = 2
	c := startSync(t, cluster, h, nil, withCustomize(customize), nil)
	_, err := c.SyncOnce(t.Context(), parent)
	want := "relatedResources[0] (configmaps): the rules select 3 related objects up to this one, more than the limit of 2 per parent (--max-related-objects)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("SyncOnce: %v, want %q", err, want)
	}
	if n := len(h.Requests()); n != 0 {
		t.Errorf("the sync hook was called %d times", n)
	}
}

// TestChildrenKeyedByHookVersion: the hook is given its children keyed
// by name (v1) or namespace/name (v2), for a namespaced parent.
func TestChildrenKeyedByHookVersion(t *testing.T) {
	for version, want := range map[string]string{"v1": "keep", "v2": "ns/keep"} {
		t.Run(version, func(t *testing.T) {
			parent := syncParent()
			h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{answerChild("keep", "old")}} })
			c, _ := syncCluster(t, h, nil, func(spec map[string]any) {
				spec["hooks"].(map[string]any)["sync"].(map[string]any)["version"] = version
			}, nil, parent, syncChild("keep", "old", parent))
			if _, err := c.SyncOnce(t.Context(), parent); err != nil {
				t.Fatalf("SyncOnce: %v", err)
			}
			observed, _ := h.Requests()[0]["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
			if _, ok := observed[want]; !ok || len(observed) != 1 {
				t.Errorf("%s hook given children %v, want key %q", version, slices.Collect(maps.Keys(observed)), want)
			}
		})
	}
}

// TestReplacedParentsStatusIsNotWritten: a sync of a parent that was
// deleted and created again under its name meanwhile (the cache still
// has the old one) does not write the old one's status over the new
// one: the write's UID precondition fails it, a conflict.
func TestReplacedParentsStatusIsNotWritten(t *testing.T) {
	old := syncParent()
	replacement := syncParent()
	replacement.SetUID("uid-of-the-replacement")
	replacement.Object["status"] = map[string]any{"mine": "new"}
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"mine": "old"}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, replacement)
	_, err := c.SyncOnce(t.Context(), old)
	if !apierrors.IsConflict(err) {
		t.Errorf("SyncOnce: %v, want a conflict", err)
	}
	if st := stored(cluster, ruleThings, "p").Object["status"]; !reflect.DeepEqual(st, map[string]any{"mine": "new"}) {
		t.Errorf("the replacement's status is %v, want it kept", st)
	}
}

// TestAbsentChildrenAnnotationEmpty: with the controller's
// AbsentChildrenAnnotation "empty", an answer without a children list
// means no children, as in metacontroller: they are deleted.
func TestAbsentChildrenAnnotationEmpty(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"status": map[string]any{"n": 0}} })
	c, cluster := syncCluster(t, h, nil, nil, map[string]string{engine.AbsentChildrenAnnotation: engine.AbsentListEmpty},
		parent, syncChild("keep", "old", parent))
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if keep := stored(cluster, ruleConfigMaps, "keep"); keep != nil {
		t.Errorf("child keep is still there; writes %v", cluster.Writes())
	}
}

// TestOnDeleteDriftIsReportedOncePerDesiredState: an OnDelete child that
// differs from what the hook asks is reported on the parent (a Normal
// ChildNotUpdated Event naming the child and the way out) once, however
// many syncs ask for the same; another desired state is another report.
func TestOnDeleteDriftIsReportedOncePerDesiredState(t *testing.T) {
	parent := syncParent()
	var value atomic.Value
	value.Store("two")
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{answerChild("keep", value.Load().(string))}}
	})
	c, cluster := syncCluster(t, h, nil, withMethod("OnDelete"), nil, parent, syncChild("keep", "one", parent))
	for range 3 {
		if _, err := c.SyncOnce(t.Context(), parent); err != nil {
			t.Fatalf("SyncOnce: %v", err)
		}
	}
	events := cluster.Events()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Normal "+children.ReasonChildNotUpdated+" ") ||
		!strings.Contains(events[0], "ConfigMap keep") || !strings.Contains(events[0], "updateStrategy: {method: InPlace}") {
		t.Fatalf("%d events (the first %.120q...), want one Normal %s naming the child and the InPlace way out", len(events), strings.Join(events, "|"), children.ReasonChildNotUpdated)
	}
	value.Store("three")
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if events := cluster.Events(); len(events) != 1 {
		t.Errorf("after a new desired state: events %q, want one more report", events)
	}
}

// TestSyncedConditionReasonsOfOneSync: the Synced condition a failed
// sync writes names why: an answer refused (InvalidAnswer), a child's
// write refused by the server, here the create of a child whose name the
// server finds invalid (WriteFailed; the answer's status is written with
// it), a hook that does not settle (Waiting). (A conflict would leave the
// condition as it is: the retry resolves it.)
func TestSyncedConditionReasonsOfOneSync(t *testing.T) {
	var n atomic.Int64
	for _, tc := range []struct {
		name, reason, message string
		answer                func(map[string]any) any
		// status: the hook's status is written along.
		status bool
	}{
		{name: "invalid", reason: engine.ReasonInvalidAnswer, message: "invalid sync hook response", answer: func(map[string]any) any {
			return map[string]any{"status": map[string]any{"x": 1}, "children": []any{
				map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "undeclared"}}}}
		}},
		{name: "write", reason: engine.ReasonWriteFailed, message: "creating ConfigMap ns/Not-A-Valid-Name", status: true, answer: func(map[string]any) any {
			return map[string]any{"status": map[string]any{"x": 1}, "children": []any{answerChild("keep", "old"), answerChild("Not-A-Valid-Name", "new")}}
		}},
		{name: "waiting", reason: engine.ReasonWaiting, message: "fixed point", answer: func(map[string]any) any {
			return map[string]any{"status": map[string]any{"n": n.Add(1)}, "children": []any{}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := syncParent()
			h := ruletest.NewHook(t, tc.answer)
			c, cluster := syncCluster(t, h, nil, nil, map[string]string{engine.SyncedConditionAnnotation: "true"},
				parent, syncChild("keep", "old", parent))
			// Deleted by someone else after the cache listed it.
			if _, err := cluster.Objects.Delete(t.Context(), ruleConfigMaps, "ns", "keep", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SyncOnce(t.Context(), parent); err == nil {
				t.Fatal("SyncOnce succeeded")
			}
			st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any)
			conditions, _ := st["conditions"].([]any)
			if len(conditions) != 1 {
				t.Fatalf("status %v, want the Synced condition", st)
			}
			cond := conditions[0].(map[string]any)
			if cond["status"] != "False" || cond["reason"] != tc.reason || !strings.Contains(fmt.Sprint(cond["message"]), tc.message) {
				t.Errorf("condition %v, want False, %s, a message with %q", cond, tc.reason, tc.message)
			}
			if tc.status && st["x"] != int64(1) {
				t.Errorf("status %v, want the hook's status written with the condition", st)
			}
		})
	}
}

// TestCreateOfAParentCostsTheMinimum: the first sync of a parent whose
// status counts its children calls the hook three times (no children; the
// three it created; the fixed point, its status as asked) and writes
// three creates and one status, nothing else.
func TestCreateOfAParentCostsTheMinimum(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(req map[string]any) any {
		observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		return map[string]any{"status": map[string]any{"children": len(observed)},
			"children": []any{answerChild("a", "1"), answerChild("b", "1"), answerChild("c", "1")}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if n := len(h.Requests()); n != 3 {
		t.Errorf("%d hook calls, want 3", n)
	}
	writes := cluster.Writes()
	slices.Sort(writes)
	want := []string{"create configmaps ns/a", "create configmaps ns/b", "create configmaps ns/c", "patch things/status ns/p"}
	if !slices.Equal(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
	if st := stored(cluster, ruleThings, "p").Object["status"].(map[string]any); st["children"] != int64(3) {
		t.Errorf("status %v, want children: 3 at once", st)
	}
}
