package decorator

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
)

// The fast tests of whole syncs (no API server): the Engine syncs one
// object (SyncOnce) of a DecoratorController built by New, of the
// configmaps labelled decorate=yes with attachments secrets (InPlace),
// whose hook is in-process and whose writes go to internal/inmemory's
// store (ruletest.Cluster). Their twins against kube-apiserver are the
// tagged tests of this package (decorator_test.go and others).

var (
	ruleConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ruleSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// decoratorFinalizer is the finalizer of the DecoratorController "rules".
const decoratorFinalizer = "metacontroller.io/decoratorcontroller-rules"

// syncDecorator starts (StartCaches) the DecoratorController "rules",
// whose sync hook is h (and finalize hook too, with finalize), on a
// cluster holding objs; it stops when the test ends.
func syncDecorator(t *testing.T, h *ruletest.Hook, finalize bool, objs ...*unstructured.Unstructured) (*Controller, *ruletest.Cluster) {
	t.Helper()
	cluster := ruletest.NewCluster(ruleServed(t), nil, objs...)
	hooks := map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.URL + "/sync", "timeout": "5s"}}}
	if finalize {
		hooks["finalize"] = map[string]any{"webhook": map[string]any{"url": h.URL + "/finalize", "timeout": "5s"}}
	}
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "rules", "uid": "dc-uid", "generation": int64(1)},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "yes"}}}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":       hooks,
		},
	}}
	c, err := New(t.Context(), dc, cluster.Options)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := c.StartCaches(t.Context()); err != nil {
		t.Fatalf("StartCaches: %v", err)
	}
	t.Cleanup(c.Stop)
	return c, cluster
}

// decorated is the ConfigMap ns/<name>, labelled decorate=yes (selected)
// and with annotation note=old.
func decorated(name string, finalizers ...string) *unstructured.Unstructured {
	cm := inmemory.Object("v1", "ConfigMap", "ns", name, map[string]string{"decorate": "yes"}, map[string]string{"note": "old"})
	cm.SetFinalizers(finalizers)
	return cm
}

// attachment is the Secret ns/<name>, an attachment of owner by "rules".
func attachment(name string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	s := inmemory.Object("v1", "Secret", "ns", name, nil, map[string]string{AttachmentAnnotation: "rules"})
	s.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.GetName(), UID: owner.GetUID(), Controller: new(true)}})
	return s
}

// answerSecret is an attachment in a hook's answer.
func answerSecret(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name}, "stringData": map[string]any{"of": name}}
}

// TestDecoratorWritesLabelsAnnotationsAndAttachments: one sync sets the
// labels the hook answers, removes the annotations it answers null
// (keeping the others), creates its attachments (owned by the object,
// with the decorator's annotation) and deletes those it no longer
// answers.
func TestDecoratorWritesLabelsAnnotationsAndAttachments(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"labels": map[string]any{"decorated": "yes"}, "annotations": map[string]any{"note": nil},
			"attachments": []any{answerSecret("new")}}
	})
	c, cluster := syncDecorator(t, h, false, obj, attachment("stale", obj))
	if _, err := c.SyncOnce(t.Context(), obj); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	got, _ := cluster.Objects.Get(ruleConfigMaps, "ns", "target")
	if l := got.GetLabels(); l["decorated"] != "yes" || l["decorate"] != "yes" {
		t.Errorf("labels %v, want decorated=yes added to decorate=yes", l)
	}
	if _, ok := got.GetAnnotations()["note"]; ok {
		t.Errorf("annotations %v, want note removed", got.GetAnnotations())
	}
	secret, _ := cluster.Objects.Get(ruleSecrets, "ns", "new")
	if secret == nil {
		t.Fatalf("attachment new was not created; writes %v", cluster.Writes())
	}
	if ref := metav1.GetControllerOf(secret); ref == nil || ref.UID != obj.GetUID() || secret.GetAnnotations()[AttachmentAnnotation] != "rules" {
		t.Errorf("attachment new has owner %v and annotations %v, want the object and %s=rules", ref, secret.GetAnnotations(), AttachmentAnnotation)
	}
	if stale, _ := cluster.Objects.Get(ruleSecrets, "ns", "stale"); stale != nil {
		t.Errorf("attachment stale is still there; writes %v", cluster.Writes())
	}
}

// TestDecoratorFinalizesAnObjectThatStopsMatching: an object that keeps
// the decorator's finalizer but is no longer selected is given to the
// finalize hook; its answer's labels apply, and once finalized the
// finalizer is removed (the object stays: it is not being deleted).
func TestDecoratorFinalizesAnObjectThatStopsMatching(t *testing.T) {
	obj := decorated("target", decoratorFinalizer)
	obj.SetLabels(map[string]string{"synced": "yes"})
	h := ruletest.NewHook(t, func(req map[string]any) any {
		return map[string]any{"labels": map[string]any{"synced": nil}, "finalized": req["finalizing"] == true}
	})
	c, cluster := syncDecorator(t, h, true, obj)
	if _, err := c.SyncOnce(t.Context(), obj); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if r := h.Requests(); len(r) == 0 || r[0]["finalizing"] != true {
		t.Fatalf("%d hook calls, none the finalize hook's with finalizing", len(r))
	}
	got, _ := cluster.Objects.Get(ruleConfigMaps, "ns", "target")
	if got == nil || len(got.GetFinalizers()) != 0 || got.GetLabels()["synced"] != "" {
		t.Errorf("object %v, want it without the finalizer and the synced label", got)
	}
}

// TestDecoratorCleanupRemovesEveryFinalizer: Cleanup, for a deleted
// DecoratorController, removes its finalizer from every object that
// carries it, read uncached, and leaves the others' finalizers.
func TestDecoratorCleanupRemovesEveryFinalizer(t *testing.T) {
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{} })
	objs := []*unstructured.Unstructured{
		decorated("a", decoratorFinalizer), decorated("b", decoratorFinalizer, "other/keep"), decorated("c"),
	}
	c, cluster := syncDecorator(t, h, true, objs...)
	if err := c.Cleanup(t.Context()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	for name, want := range map[string][]string{"a": nil, "b": {"other/keep"}, "c": nil} {
		got, _ := cluster.Objects.Get(ruleConfigMaps, "ns", name)
		if !slices.Equal(got.GetFinalizers(), want) {
			t.Errorf("%s has finalizers %v, want %v", name, got.GetFinalizers(), want)
		}
	}
	if len(h.Requests()) != 0 {
		t.Errorf("Cleanup called the hooks: %v", h.Requests())
	}
}

// TestDecoratorRefusedAnswerChangesNothing: an answer refused whole (an
// attachment in another namespace) changes neither labels nor
// attachments.
func TestDecoratorRefusedAnswerChangesNothing(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any {
		forged := answerSecret("x")
		forged["metadata"].(map[string]any)["namespace"] = "default"
		return map[string]any{"labels": map[string]any{"v": "bad"}, "attachments": []any{answerSecret("fine"), forged}}
	})
	c, cluster := syncDecorator(t, h, false, obj, attachment("kept", obj))
	if _, err := c.SyncOnce(t.Context(), obj); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("SyncOnce: %v, want the refusal of the namespace", err)
	}
	if w := cluster.Writes(); len(w) > 0 {
		t.Errorf("a refused answer wrote %v", w)
	}
}

// TestDecoratorLaterFailingCallKeepsTheFirstAnswer: the first call's
// answer is written (its attachment created, its labels set) although
// the next round's call fails, and the failure is the sync's error,
// recorded as a SyncError Event.
func TestDecoratorLaterFailingCallKeepsTheFirstAnswer(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(req map[string]any) any {
		if set, _ := req["attachments"].(map[string]any)["Secret.v1"].(map[string]any); len(set) > 0 {
			return ruletest.HTTPError(500) // the second call
		}
		return map[string]any{"labels": map[string]any{"answer": "first"}, "attachments": []any{answerSecret("s")}}
	})
	c, cluster := syncDecorator(t, h, false, obj)
	if _, err := c.SyncOnce(t.Context(), obj); err == nil {
		t.Error("SyncOnce succeeded, but the second call failed")
	}
	if s, _ := cluster.Objects.Get(ruleSecrets, "ns", "s"); s == nil {
		t.Errorf("the first answer's attachment is missing; writes %v", cluster.Writes())
	}
	if got, _ := cluster.Objects.Get(ruleConfigMaps, "ns", "target"); got.GetLabels()["answer"] != "first" {
		t.Errorf("labels %v, want the first answer's", got.GetLabels())
	}
	if events := cluster.Events(); !slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, engine.ReasonSyncError) }) {
		t.Errorf("events %v, want a %s", events, engine.ReasonSyncError)
	}
}
