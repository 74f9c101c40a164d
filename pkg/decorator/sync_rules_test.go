package decorator

import (
	"fmt"
	"reflect"
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
// whose sync hook is h, then edit applied to its object, on a cluster
// holding objs; it stops when the test ends.
func syncDecorator(t *testing.T, h *ruletest.Hook, edit func(dc *unstructured.Unstructured), objs ...*unstructured.Unstructured) (*Controller, *ruletest.Cluster) {
	t.Helper()
	cluster := ruletest.NewCluster(ruleServed(t), nil, objs...)
	return startDecorator(t, cluster, "rules", h, edit), cluster
}

// startDecorator is syncDecorator of the DecoratorController name on a
// cluster already made.
func startDecorator(t *testing.T, cluster *ruletest.Cluster, name string, h *ruletest.Hook, edit func(dc *unstructured.Unstructured)) *Controller {
	t.Helper()
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": name, "uid": "dc-uid-" + name, "generation": int64(1)},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "yes"}}}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":       map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.URL + "/sync", "timeout": "5s"}}},
		},
	}}
	if edit != nil {
		edit(dc)
	}
	c, err := New(t.Context(), dc, cluster.Options)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ruletest.StartCaches(t, c)
	return c
}

// withFinalize adds a finalize hook at h.
func withFinalize(h *ruletest.Hook) func(dc *unstructured.Unstructured) {
	return func(dc *unstructured.Unstructured) {
		dc.Object["spec"].(map[string]any)["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": h.URL + "/finalize", "timeout": "5s"}}
	}
}

// decorating makes the decorator's resources those of apiVersion and
// resource labelled decorate=yes.
func decorating(apiVersion, resource string) func(dc *unstructured.Unstructured) {
	return func(dc *unstructured.Unstructured) {
		dc.Object["spec"].(map[string]any)["resources"] = []any{map[string]any{"apiVersion": apiVersion, "resource": resource,
			"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "yes"}}}}
	}
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
	c, cluster := syncDecorator(t, h, nil, obj, attachment("stale", obj))
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
	c, cluster := syncDecorator(t, h, withFinalize(h), obj)
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
	c, cluster := syncDecorator(t, h, withFinalize(h), objs...)
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
	c, cluster := syncDecorator(t, h, nil, obj, attachment("kept", obj))
	_, err := c.SyncOnce(t.Context(), obj)
	cluster.Refused(t, err, "namespace")
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
	c, cluster := syncDecorator(t, h, nil, obj)
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

// hasEvent reports whether events has one of reason.
func hasEvent(events []string, reason string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, " "+reason+" ") })
}

// TestDecoratorAnswerWithoutAttachmentsIsRefused: an answer without an
// "attachments" list (a typo) is refused, as it would delete every
// attachment: nothing is written, and its unknown key is reported.
func TestDecoratorAnswerWithoutAttachmentsIsRefused(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"labels": map[string]any{"decorated": "changed"}, "attachment": []any{answerSecret("s")}}
	})
	c, cluster := syncDecorator(t, h, nil, obj, attachment("kept", obj))
	_, err := c.SyncOnce(t.Context(), obj)
	cluster.Refused(t, err, `no "attachments" list (it has "attachment" (did you mean "attachments"?))`)
	if events := cluster.Events(); !hasEvent(events, engine.ReasonUnknownAnswerField) {
		t.Errorf("events %v, want a %s", events, engine.ReasonUnknownAnswerField)
	}
}

// TestDecoratorOfABuiltInObjectKeepsItsStatus: a decorated built-in
// object (a Service) keeps the hook's status in StatusAnnotation; its
// own .status is untouched and is what the hook is given.
func TestDecoratorOfABuiltInObjectKeepsItsStatus(t *testing.T) {
	svc := inmemory.Object("v1", "Service", "ns", "web", map[string]string{"decorate": "yes"}, nil)
	svc.Object["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "10.0.0.1"}}}}
	h := ruletest.NewHook(t, func(req map[string]any) any {
		given, _ := req["object"].(map[string]any)
		return map[string]any{"status": map[string]any{"given": given["status"]}}
	})
	c, cluster := syncDecorator(t, h, decorating("v1", "services"), svc)
	if _, err := c.SyncOnce(t.Context(), svc); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	got, _ := cluster.Objects.Get(schema.GroupVersionResource{Version: "v1", Resource: "services"}, "ns", "web")
	if a := got.GetAnnotations()[engine.StatusAnnotation]; a != `{"given":{"loadBalancer":{"ingress":[{"ip":"10.0.0.1"}]}}}` {
		t.Errorf("annotation %s = %q, want the hook's status, of the Service's own status as given", engine.StatusAnnotation, a)
	}
	if !reflect.DeepEqual(got.Object["status"], svc.Object["status"]) {
		t.Errorf("the Service's own status is %v, want it untouched", got.Object["status"])
	}
}

// TestDecoratorNullStatusWritesNoStatus: an answer whose status is null
// leaves the object's status as it is (its labels are still written).
func TestDecoratorNullStatusWritesNoStatus(t *testing.T) {
	thing := inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "t", map[string]string{"decorate": "yes"}, nil)
	thing.Object["status"] = map[string]any{"by": "other"}
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"labels": map[string]any{"labelled": "yes"}, "status": nil}
	})
	c, cluster := syncDecorator(t, h, decorating("test.metactl.io/v1", "clusterthings"), thing)
	if _, err := c.SyncOnce(t.Context(), thing); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	got, _ := cluster.Objects.Get(schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}, "", "t")
	if got.GetLabels()["labelled"] != "yes" || !reflect.DeepEqual(got.Object["status"], map[string]any{"by": "other"}) {
		t.Errorf("object %v, want it labelled, its status kept", got)
	}
	if w := cluster.Writes(); len(w) != 1 {
		t.Errorf("writes %v, want the labels' patch alone", w)
	}
}

// TestDecoratorSyncedConditionShowsHookFailure: with the Synced
// condition on, a sync whose hook fails writes it False, reason
// HookFailed, its message naming the error. (A sync outside the work
// queue, as SyncOnce's, has no attempt to name: the tagged twin checks
// that part.)
func TestDecoratorSyncedConditionShowsHookFailure(t *testing.T) {
	thing := inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "t", map[string]string{"decorate": "yes"}, nil)
	h := ruletest.NewHook(t, func(map[string]any) any { return ruletest.HTTPError(500) })
	c, cluster := syncDecorator(t, h, func(dc *unstructured.Unstructured) {
		decorating("test.metactl.io/v1", "clusterthings")(dc)
		dc.SetAnnotations(map[string]string{engine.SyncedConditionAnnotation: "true"})
	}, thing)
	if _, err := c.SyncOnce(t.Context(), thing); err == nil {
		t.Fatal("SyncOnce of a failing hook did not fail")
	}
	got, _ := cluster.Objects.Get(schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}, "", "t")
	conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if len(conditions) != 1 {
		t.Fatalf("conditions %v, want %s alone", conditions, engine.SyncedConditionType)
	}
	cond := conditions[0].(map[string]any)
	if cond["type"] != engine.SyncedConditionType || cond["status"] != "False" || cond["reason"] != engine.ReasonHookFailed ||
		!strings.Contains(fmt.Sprint(cond["message"]), "HTTP 500") {
		t.Errorf("condition %v, want %s False %s naming the error", cond, engine.SyncedConditionType, engine.ReasonHookFailed)
	}
}

// TestDecoratorClusterScopedAttachmentIsRefused: a cluster-scoped
// attachment of a namespaced object refuses the answer whole (the garbage
// collector would ignore its owner reference): nothing is written.
func TestDecoratorClusterScopedAttachmentIsRefused(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"attachments": []any{answerSecret("ok"),
			map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "ClusterThing", "metadata": map[string]any{"name": "c"}}}}
	})
	c, cluster := syncDecorator(t, h, func(dc *unstructured.Unstructured) {
		dc.Object["spec"].(map[string]any)["attachments"] = []any{
			map[string]any{"apiVersion": "v1", "resource": "secrets"},
			map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
		}
	}, obj)
	_, err := c.SyncOnce(t.Context(), obj)
	cluster.Refused(t, err, "cannot be owned by a namespaced object")
}

// TestDecoratorAbsentAttachmentsAnnotationEmpty: with the controller's
// AbsentAttachmentsAnnotation "empty", an answer without an attachments
// list means none, as in metacontroller: they are deleted.
func TestDecoratorAbsentAttachmentsAnnotationEmpty(t *testing.T) {
	obj := decorated("target")
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"labels": map[string]any{"seen": "yes"}} })
	c, cluster := syncDecorator(t, h, func(dc *unstructured.Unstructured) {
		dc.SetAnnotations(map[string]string{engine.AbsentAttachmentsAnnotation: engine.AbsentListEmpty})
	}, obj, attachment("stale", obj))
	if _, err := c.SyncOnce(t.Context(), obj); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	if stale, _ := cluster.Objects.Get(ruleSecrets, "ns", "stale"); stale != nil {
		t.Errorf("attachment stale is still there; writes %v", cluster.Writes())
	}
}

// TestDecoratorConditionsAndEventsOfOneSync: the conditions a decorator's
// hook answers get lastTransitionTime and observedGeneration filled, the
// hook settles on them at its second call, and the Events it asks for
// are recorded once for the sync (a Warning, and Normal for no type).
func TestDecoratorConditionsAndEventsOfOneSync(t *testing.T) {
	thing := inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "t", map[string]string{"decorate": "yes"}, nil)
	thing.SetGeneration(4)
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Decorated"}}},
			"events": []any{
				map[string]any{"type": "Warning", "reason": "QuotaLow", "message": "90% used"},
				map[string]any{"reason": "Called", "message": "hello"},
			},
		}
	})
	c, cluster := syncDecorator(t, h, decorating("test.metactl.io/v1", "clusterthings"), thing)
	if _, err := c.SyncOnce(t.Context(), thing); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
	got, _ := cluster.Objects.Get(schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}, "", "t")
	conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	if len(conditions) != 1 || conditions[0].(map[string]any)["lastTransitionTime"] == nil || conditions[0].(map[string]any)["observedGeneration"] != int64(4) {
		t.Errorf("conditions %v, want Ready with lastTransitionTime and observedGeneration 4", conditions)
	}
	if n := len(h.Requests()); n != 2 {
		t.Errorf("%d hook calls, want 2 (the conditions, then the same again: the fixed point)", n)
	}
	if events, want := cluster.Events(), []string{"Warning QuotaLow 90% used", "Normal Called hello"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}
