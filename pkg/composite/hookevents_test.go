//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
)

// eventsOn lists the Events of the object named name in namespace.
func eventsOn(t *testing.T, namespace, name string) []corev1.Event {
	t.Helper()
	events, err := env.Kube.CoreV1().Events(namespace).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	return events.Items
}

// eventWith returns the Event of reason on the object, nil when none.
func eventWith(t *testing.T, namespace, name, reason string) *corev1.Event {
	t.Helper()
	for _, e := range eventsOn(t, namespace, name) {
		if e.Reason == reason {
			return &e
		}
	}
	return nil
}

// TestAnswerEventsAreRecordedOnTheParent: the Events an answer asks for
// are recorded on the parent with the hook's type, reason and message,
// and an Event the hook repeats in the rounds of one sync once.
func TestAnswerEventsAreRecordedOnTheParent(t *testing.T) {
	ns := env.CreateNamespace(t)
	var calls atomic.Int64
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := valueHook(req).(map[string]any)
		answer["events"] = []any{
			map[string]any{"type": "Warning", "reason": "BackupFailed", "message": "disk full"},
			map[string]any{"reason": "Called", "message": fmt.Sprintf("call %d", calls.Add(1))},
		}
		return answer
	})
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", nil)
	// The rounds: the child written, the status that counts it, the
	// fixed point. Events are recorded in order, so that once the third
	// call's is there, the first sync's are all there.
	waitForEvent(t, ns, "p1", "Called", "call 3")
	if got := hook.calls.Load(); got != 3 {
		t.Fatalf("hook calls = %d, want 3 in one sync", got)
	}
	e := eventWith(t, ns, "p1", "BackupFailed")
	if e == nil {
		t.Fatal("no BackupFailed Event on the parent")
	}
	if e.Type != corev1.EventTypeWarning || e.Message != "disk full" || e.Count != 1 {
		t.Errorf("BackupFailed Event: type %s, message %q, count %d; want Warning, the hook's message as it is, once in one sync", e.Type, e.Message, e.Count)
	}
	if e := eventWith(t, ns, "p1", "Called"); e == nil || e.Type != corev1.EventTypeNormal {
		t.Errorf("an event without type is not Normal: %+v", e)
	}
}

// TestInvalidEventRefusesTheAnswer: an answer with an invalid event type
// is refused whole: no child, no status, none of its Events; a SyncError
// Event says which field and how to fix it.
func TestInvalidEventRefusesTheAnswer(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := valueHook(req).(map[string]any)
		answer["events"] = []any{
			map[string]any{"reason": "Fine"},
			map[string]any{"type": "Warn", "reason": "Broken"},
		}
		return answer
	})
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v"})
	waitForEvent(t, ns, "p1", "SyncError", `events[1].type "Warn": must be Normal or Warning`)
	if _, err := get(t, configMapsGVR, ns, "p1-cm"); err == nil {
		t.Error("the refused answer's child was written")
	}
	if p, _ := get(t, thingsGVR, ns, "p1"); p.Object["status"] != nil {
		t.Errorf("the refused answer's status was written: %v", p.Object["status"])
	}
	if e := eventWith(t, ns, "p1", "Fine"); e != nil {
		t.Error("an Event of the refused answer was recorded")
	}
}

// TestHookEventCannotUseMetactlReason: an answer asking for an Event with
// one of metactl's own reasons (a forged SyncError) is refused whole: the
// only SyncError Event on the parent is metactl's, naming the entry, and
// no child is written.
func TestHookEventCannotUseMetactlReason(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := valueHook(req).(map[string]any)
		answer["events"] = []any{map[string]any{"type": "Warning", "reason": "SyncError", "message": "forged by the hook"}}
		return answer
	})
	startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v"})
	waitForEvent(t, ns, "p1", "SyncError", `events[0].reason "SyncError" is one of metactl's own`)
	if _, err := get(t, configMapsGVR, ns, "p1-cm"); err == nil {
		t.Error("the refused answer's child was written")
	}
	events, err := env.Kube.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, "forged by the hook") {
			t.Errorf("the hook's Event with metactl's reason was recorded: %s %s", e.Reason, e.Message)
		}
	}
}

// condition returns the condition of type typ in obj's status.
func condition(obj *unstructured.Unstructured, typ string) map[string]any {
	return controllertest.Condition(obj, typ)
}

// poke sets a label on the parent and waits for the hook to be given it:
// the sync before that one is then done (a key is synced by one worker
// at a time).
func poke(t *testing.T, hook *testHook, gvr schema.GroupVersionResource, ns, name, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{"poke":%q}}}`, value)
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Patch(ctx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the hook given label poke="+value, func(context.Context) (bool, error) {
		last := hook.lastRequest()
		return last != nil && last.Parent.GetLabels()["poke"] == value, nil
	})
}

// TestConditionsReachAFixedPoint: a hook that answers conditions without
// lastTransitionTime gets them filled, is given them in the next round,
// and settles there: two calls, one status write; a later sync with the
// same answer writes nothing.
func TestConditionsReachAFixedPoint(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Fine"}}}}
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", nil)
	p := waitFor(t, thingsGVR, ns, "p1", "a Ready condition", func(o *unstructured.Unstructured) bool {
		return o != nil && condition(o, "Ready") != nil
	})
	ready := condition(p, "Ready")
	if ready["lastTransitionTime"] == nil || ready["observedGeneration"] != p.GetGeneration() {
		t.Errorf("Ready = %v: want lastTransitionTime and observedGeneration %d filled", ready, p.GetGeneration())
	}
	requests := hook.requestsSnapshot()
	if len(requests) != 2 {
		t.Fatalf("hook calls = %d, want 2 (the conditions, the same again: the fixed point)", len(requests))
	}
	if given := condition(requests[1].Parent, "Ready"); given == nil || given["lastTransitionTime"] != ready["lastTransitionTime"] {
		t.Errorf("the second call was given Ready %v, want the filled one %v", given, ready)
	}
	if got := controllertest.Unsettled(cc.GetName()); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0", got)
	}
	// Another sync, the same answer: nothing to write.
	poke(t, hook, thingsGVR, ns, "p1", "1")
	poke(t, hook, thingsGVR, ns, "p1", "2")
	if got := controllertest.Writes(cc.GetName(), "patch", "status"); got != 1 {
		t.Errorf("status writes = %v, want 1: the kept lastTransitionTime counted as a change", got)
	}
}

// TestConditionTimesFollowTheStatus: lastTransitionTime is kept while a
// condition's status holds, across syncs and generations, and set to now
// when it changes; observedGeneration follows the generation unless the
// hook gives one.
func TestConditionTimesFollowTheStatus(t *testing.T) {
	ns := env.CreateNamespace(t)
	const old = "2020-01-01T00:00:00Z"
	p1 := newThing(t, thingsGVR, ns, "p1", nil)
	// A condition from before, with its time.
	status := `{"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"` + old + `"}]}}`
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	var ready atomic.Value
	ready.Store("True")
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": ready.Load(), "reason": "Checked"},
			map[string]any{"type": "Custom", "status": "True", "observedGeneration": 7},
		}}}
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)

	p := waitFor(t, thingsGVR, ns, "p1", "Ready Checked", func(o *unstructured.Unstructured) bool {
		return o != nil && condition(o, "Ready")["reason"] == "Checked"
	})
	if c := condition(p, "Ready"); c["lastTransitionTime"] != old || c["observedGeneration"] != p1.GetGeneration() {
		t.Errorf("Ready = %v: want the time it had (%s) and observedGeneration %d", c, old, p1.GetGeneration())
	}
	if c := condition(p, "Custom"); c["observedGeneration"] != int64(7) || c["lastTransitionTime"] == nil {
		t.Errorf("Custom = %v: want the hook's observedGeneration 7 and a lastTransitionTime", c)
	}

	// A new generation, the same status: the time stays.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "2"})
	p = waitFor(t, thingsGVR, ns, "p1", "Ready at generation 2", func(o *unstructured.Unstructured) bool {
		return condition(o, "Ready")["observedGeneration"] == o.GetGeneration() && o.GetGeneration() > p1.GetGeneration()
	})
	if c := condition(p, "Ready"); c["lastTransitionTime"] != old {
		t.Errorf("Ready = %v after a new generation: want the time kept (%s)", c, old)
	}

	// The status flips: the time is now.
	before := time.Now().UTC().Truncate(time.Second)
	ready.Store("False")
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "3"})
	p = waitFor(t, thingsGVR, ns, "p1", "Ready False", func(o *unstructured.Unstructured) bool {
		return condition(o, "Ready")["status"] == "False"
	})
	c := condition(p, "Ready")
	at, err := time.Parse(time.RFC3339, fmt.Sprint(c["lastTransitionTime"]))
	if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("Ready = %v after it flipped: want lastTransitionTime between %s and now", c, before.Format(time.RFC3339))
	}
	if c["observedGeneration"] != p.GetGeneration() {
		t.Errorf("Ready = %v: want observedGeneration %d", c, p.GetGeneration())
	}
	if got := controllertest.Unsettled(cc.GetName()); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0", got)
	}
}

// TestPrunedConditionFieldsCauseNoWrites: where the status schema drops
// lastTransitionTime and observedGeneration of conditions (or only
// observedGeneration), the status metactl wrote never has them; later
// syncs of the same answer write nothing, and a time the schema keeps is
// kept.
func TestPrunedConditionFieldsCauseNoWrites(t *testing.T) {
	for _, tc := range []struct {
		resource, kind string
		keepsTime      bool
	}{
		{"prunedthings", "PrunedThing", false},
		{"partlyprunedthings", "PartlyPrunedThing", true},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			gvr := schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: tc.resource}
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, func(req *syncRequest) any {
				return map[string]any{"children": []any{}, "status": map[string]any{
					"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Fine"}}}}
			})
			cc := compositeController(t, hook, gvr, nil)
			startController(t, cc)
			parent := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": gvr.GroupVersion().String(), "kind": tc.kind,
				"metadata": map[string]any{"name": "p1", "namespace": ns, "labels": map[string]any{"test": testLabel(t)}},
				"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "p1"}}},
			}}
			if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx(t), parent, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := waitFor(t, gvr, ns, "p1", "Ready", func(o *unstructured.Unstructured) bool {
				return o != nil && condition(o, "Ready") != nil
			})
			ready := condition(p, "Ready")
			if ready["observedGeneration"] != nil || (ready["lastTransitionTime"] != nil) != tc.keepsTime {
				t.Fatalf("Ready = %v: the schema did not prune as the test expects", ready)
			}
			poke(t, hook, gvr, ns, "p1", "1")
			poke(t, hook, gvr, ns, "p1", "2")
			if got := controllertest.Writes(cc.GetName(), "patch", "status"); got != 1 {
				t.Errorf("status writes = %v, want 1: filling the pruned fields wrote the status again", got)
			}
			if got := controllertest.Unsettled(cc.GetName()); got != 0 {
				t.Errorf("unsettled syncs = %v, want 0", got)
			}
			if p, _ := get(t, gvr, ns, "p1"); condition(p, "Ready")["lastTransitionTime"] != ready["lastTransitionTime"] {
				t.Errorf("Ready = %v, was %v: want the same", condition(p, "Ready"), ready)
			}
		})
	}
}

// TestConditionsWithoutTimesCostNoWrite: a parent whose conditions were
// written without lastTransitionTime and observedGeneration (by
// metacontroller, say) is not written only to add them when the hook
// answers the status it has; when the status changes, they are filled.
func TestConditionsWithoutTimesCostNoWrite(t *testing.T) {
	ns := env.CreateNamespace(t)
	newThing(t, thingsGVR, ns, "p1", nil)
	status := `{"status":{"observedGeneration":1,"conditions":[{"type":"Ready","status":"True","reason":"Fine"}]}}`
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	var ready atomic.Value
	ready.Store("True")
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": ready.Load(), "reason": "Fine"}}}}
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	poke(t, hook, thingsGVR, ns, "p1", "1") // the first sync is done
	if got := controllertest.Writes(cc.GetName(), "patch", "status"); got != 0 {
		t.Errorf("status writes = %v, want 0: the hook answered the status the parent has", got)
	}
	ready.Store("False")
	poke(t, hook, thingsGVR, ns, "p1", "2")
	p := waitFor(t, thingsGVR, ns, "p1", "Ready False", func(o *unstructured.Unstructured) bool {
		return o != nil && condition(o, "Ready")["status"] == "False"
	})
	if c := condition(p, "Ready"); c["lastTransitionTime"] == nil || c["observedGeneration"] != p.GetGeneration() {
		t.Errorf("Ready = %v: want lastTransitionTime and observedGeneration filled once the status changed", c)
	}
}

// TestRollingRecordsTheLatestRevisionsEvents: in a rolling update the hook
// is called once per revision; only the latest revision's answer's events
// are recorded (docs/hooks.md, "events").
func TestRollingRecordsTheLatestRevisionsEvents(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := rollingHook(req).(map[string]any)
		if mark := req.Parent.GetAnnotations()["mark"]; mark != "" {
			version, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version")
			answer["events"] = []any{map[string]any{"reason": "Revision", "message": version + " mark " + mark}}
		}
		return answer
	})
	startController(t, rollingController(t, hook, "RollingInPlace"))
	newThing(t, thingsGVR, ns, "p1", map[string]any{"replicas": int64(2), "version": "v1"})
	testenv.Eventually(t, 30*time.Second, "2 children on v1", func(context.Context) (bool, error) {
		v, _ := versions(t, ns)
		return countVersion(v, "v1") == 2, nil
	})
	markReady(t, ns, "v1")
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")
	// A new revision whose children never get ready: the rollout stops
	// with a child on each revision, and every sync calls the hook for
	// both.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	testenv.Eventually(t, 30*time.Second, "a child on each revision", func(context.Context) (bool, error) {
		v, _ := versions(t, ns)
		return countVersion(v, "v1") == 1 && countVersion(v, "v2") == 1, nil
	})
	annotate := func(mark string) {
		patch := []byte(`{"metadata":{"annotations":{"mark":"` + mark + `"}}}`)
		if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("1")
	waitForEvent(t, ns, "p1", "Revision", "v2 mark 1")
	calledForOld := false
	for _, r := range hook.requestsSnapshot() {
		if v, _, _ := unstructured.NestedString(r.Parent.Object, "spec", "version"); v == "v1" && r.Parent.GetAnnotations()["mark"] == "1" {
			calledForOld = true
		}
	}
	if !calledForOld {
		t.Fatal("the hook was not called for the old revision with mark 1: the test shows nothing")
	}
	// Events are recorded in order: once a later sync's is there, any of
	// the first sync's is too.
	annotate("2")
	waitForEvent(t, ns, "p1", "Revision", "v2 mark 2")
	for _, e := range eventsOn(t, ns, "p1") {
		if e.Reason == "Revision" && strings.HasPrefix(e.Message, "v1 ") {
			t.Errorf("the old revision's answer's event was recorded: %q", e.Message)
		}
	}
}
