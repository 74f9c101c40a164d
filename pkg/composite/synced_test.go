//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
)

// syncedCondition returns the metactl.io/Synced condition of obj; nil when
// it has none.
func syncedCondition(obj *unstructured.Unstructured) map[string]any {
	return controllertest.Condition(obj, engine.SyncedConditionType)
}

// hasSynced returns a check that obj has the Synced condition with status
// and reason.
func hasSynced(status, reason string) func(*unstructured.Unstructured) bool {
	return func(obj *unstructured.Unstructured) bool {
		c := syncedCondition(obj)
		return c != nil && c["status"] == status && c["reason"] == reason
	}
}

// optIn annotates a controller object to write the Synced condition.
func optIn(cc *unstructured.Unstructured, value string) *unstructured.Unstructured {
	cc.SetAnnotations(map[string]string{engine.SyncedConditionAnnotation: value})
	return cc
}

// isolated makes cc select only the parents of namespace ns (newParent's),
// not those a previous run of the test left in a namespace being deleted.
func isolated(cc *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	cc.Object["spec"].(map[string]any)["parentResource"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{"test": ns}}
	return cc
}

// newParent creates the Thing name in ns, labelled for isolated.
func newParent(t *testing.T, ns, name string, spec map[string]any) {
	t.Helper()
	if spec == nil {
		spec = map[string]any{}
	}
	spec["selector"] = map[string]any{"matchLabels": map[string]any{"parent": name}}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": thingsGVR.GroupVersion().String(), "kind": "Thing",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"test": ns}}, "spec": spec}}
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func failWith500(h *testHook) {
	h.setHandler(func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
}

// TestSyncedConditionShowsFailureAndRecovery: a failing hook makes the
// parent Synced=False HookFailed, with the attempt and the next attempt in
// the message, written once however often the sync is retried (only the
// attempt changes, within SyncedRewriteInterval); a recovered hook makes it
// Synced=True.
func TestSyncedConditionShowsFailureAndRecovery(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	failWith500(hook)
	cc := optIn(isolated(compositeController(t, hook, thingsGVR, nil), ns), "true")
	limiter := &countingLimiter{delays: []time.Duration{20 * time.Millisecond}}
	// The metrics count per controller name, across runs of the test.
	writes0 := controllertest.Writes(cc.GetName(), "patch", "status")
	startController(t, cc, func(o *composite.Options) { o.RateLimiter = limiter })
	started := time.Now()
	newParent(t, ns, "p1", map[string]any{"value": "a"})

	obj := waitFor(t, thingsGVR, ns, "p1", "Synced=False HookFailed", hasSynced("False", engine.ReasonHookFailed))
	c := syncedCondition(obj)
	msg, _ := c["message"].(string)
	t.Logf("condition: %v", c)
	for _, want := range []string{"compositecontroller " + cc.GetName() + ": sync hook ", "HTTP 500", "; attempt ", ", next attempt at "} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if c["lastTransitionTime"] == nil || c["observedGeneration"] == nil {
		t.Errorf("condition %v lacks lastTransitionTime or observedGeneration", c)
	}

	// Many retries of the same error: the condition is not written again
	// for each (only its attempt and next attempt would change).
	testenv.Eventually(t, 30*time.Second, "20 failed hook calls", func(context.Context) (bool, error) {
		return hook.calls.Load() >= 20, nil
	})
	writes := controllertest.Writes(cc.GetName(), "patch", "status") - writes0
	if bound := 1 + float64(time.Since(started)/engine.SyncedRewriteInterval); writes > bound {
		t.Errorf("%v status writes during %d failing syncs in %v, want at most %v", writes, hook.calls.Load(), time.Since(started).Round(time.Millisecond), bound)
	}

	hook.answer(valueHook)
	obj = waitFor(t, thingsGVR, ns, "p1", "Synced=True after the hook recovered", hasSynced("True", engine.ReasonSynced))
	if got := statusField(obj, "value"); got != "a" {
		t.Errorf("status.value = %v, want a: the hook's status and the condition together", got)
	}
	if c, want := syncedCondition(obj), "synced by compositecontroller "+cc.GetName(); c["message"] != want {
		t.Errorf("Synced=True message %q, want %q", c["message"], want)
	}
}

// TestSyncedConditionRetryAfter: a hook answering 429 with Retry-After is
// shown with its next attempt that far ahead.
func TestSyncedConditionRetryAfter(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	hook.setHandler(func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "later", http.StatusTooManyRequests)
	})
	startController(t, optIn(isolated(compositeController(t, hook, thingsGVR, nil), ns), "true"))
	newParent(t, ns, "p1", nil)
	obj := waitFor(t, thingsGVR, ns, "p1", "Synced=False HookFailed", hasSynced("False", engine.ReasonHookFailed))
	msg, _ := syncedCondition(obj)["message"].(string)
	_, at, ok := strings.Cut(msg, "next attempt at ")
	if !ok {
		t.Fatalf("message %q has no next attempt", msg)
	}
	next, err := time.Parse(time.RFC3339, at)
	if err != nil {
		t.Fatalf("next attempt %q: %v", at, err)
	}
	if d := time.Until(next); d < 55*time.Minute || d > 61*time.Minute {
		t.Errorf("next attempt %v is %v away, want the hour the hook asked for", next, d.Round(time.Second))
	}
}

// TestSyncedConditionWithTheHooksOwnConditions: a hook that writes its own
// conditions keeps them next to Synced; it reaches a fixed point in one
// call per sync, and resyncs write nothing (no ping-pong between the hook's
// status and metactl's condition).
func TestSyncedConditionWithTheHooksOwnConditions(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := valueHook(req).(map[string]any)
		answer["status"].(map[string]any)["conditions"] = []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Fine", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}
		return answer
	})
	cc := optIn(isolated(compositeController(t, hook, thingsGVR, func(spec map[string]any) { spec["resyncPeriodSeconds"] = int64(1) }), ns), "true")
	writes0 := controllertest.Writes(cc.GetName(), "patch", "status")
	startController(t, cc)
	newParent(t, ns, "p1", map[string]any{"value": "a"})
	obj := waitFor(t, thingsGVR, ns, "p1", "Ready and Synced=True", func(o *unstructured.Unstructured) bool {
		if !hasSynced("True", engine.ReasonSynced)(o) {
			return false
		}
		list, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		return len(list) == 2 && list[0].(map[string]any)["type"] == "Ready"
	})
	rv := obj.GetResourceVersion()
	calls, syncs := hook.calls.Load(), controllertest.Syncs(cc.GetName(), "success")
	converged := time.Now()
	testenv.Eventually(t, 20*time.Second, "three resync periods and as many syncs", func(context.Context) (bool, error) {
		return controllertest.Syncs(cc.GetName(), "success") >= syncs+3 && time.Since(converged) > 3*time.Second, nil
	})
	gotCalls, gotSyncs := hook.calls.Load()-calls, controllertest.Syncs(cc.GetName(), "success")-syncs
	if float64(gotCalls) > gotSyncs+1 {
		t.Errorf("%d hook calls in %v resyncs, want one each: metactl's condition made the hook's status differ", gotCalls, gotSyncs)
	}
	now, err := get(t, thingsGVR, ns, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if now.GetResourceVersion() != rv {
		t.Errorf("resourceVersion %s after the resyncs, was %s: status written again; conditions %v", now.GetResourceVersion(), rv, statusField(now, "conditions"))
	}
	if got := controllertest.Writes(cc.GetName(), "patch", "status") - writes0; got != 1 {
		t.Errorf("status writes = %v, want 1: the hook's status carrying the condition", got)
	}
}

// TestSyncedConditionReasons: an answer metactl refuses is InvalidAnswer;
// a child the API server refuses is WriteFailed; a hook that never settles
// is Waiting.
func TestSyncedConditionReasons(t *testing.T) {
	child := func(c func(parent *unstructured.Unstructured) map[string]any) func(req *syncRequest) any {
		return func(req *syncRequest) any {
			return map[string]any{"status": map[string]any{"x": 1}, "children": []any{c(req.Parent)}}
		}
	}
	var n atomic.Int64
	for _, tc := range []struct {
		name, reason, message string
		answer                func(req *syncRequest) any
	}{
		{"invalid", engine.ReasonInvalidAnswer, "invalid sync hook response", child(func(*unstructured.Unstructured) map[string]any {
			return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "undeclared"}}
		})},
		{"write", engine.ReasonWriteFailed, "creating ConfigMap", child(func(parent *unstructured.Unstructured) map[string]any {
			return configMapChild(parent, "Not-A-Valid-Name", nil)
		})},
		{"events", engine.ReasonInvalidAnswer, `events[0].type "Warn"`, func(*syncRequest) any {
			return map[string]any{"status": map[string]any{"x": 1}, "children": []any{},
				"events": []any{map[string]any{"type": "Warn", "reason": "Oops"}}}
		}},
		{"waiting", engine.ReasonWaiting, "fixed point", func(*syncRequest) any {
			return map[string]any{"status": map[string]any{"n": n.Add(1)}, "children": []any{}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, tc.answer)
			startController(t, optIn(isolated(compositeController(t, hook, thingsGVR, nil), ns), "true"))
			newParent(t, ns, "p1", nil)
			obj := waitFor(t, thingsGVR, ns, "p1", "Synced=False "+tc.reason, hasSynced("False", tc.reason))
			if msg, _ := syncedCondition(obj)["message"].(string); !strings.Contains(msg, tc.message) || !strings.Contains(msg, "; attempt ") {
				t.Errorf("message %q lacks %q or the attempt", msg, tc.message)
			}
		})
	}
}

// TestSyncedConditionIsOptIn: without the annotation or the option nothing
// is written; the option turns it on for every controller, and the
// annotation "false" off for one.
func TestSyncedConditionIsOptIn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation string // "" for none
		option     bool
		want       bool
	}{
		{"default", "", false, false},
		{"option", "", true, true},
		{"option-annotation-false", "false", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, valueHook)
			failWith500(hook)
			cc := isolated(compositeController(t, hook, thingsGVR, nil), ns)
			if tc.annotation != "" {
				optIn(cc, tc.annotation)
			}
			startController(t, cc, func(o *composite.Options) { o.SyncedCondition = tc.option })
			newParent(t, ns, "p1", map[string]any{"value": "a"})
			waitForEvent(t, ns, "p1", engine.ReasonSyncError, "HTTP 500")
			hook.answer(valueHook)
			// The status write of the sync after the failures: when the
			// condition is on, it is there by then.
			obj := waitFor(t, thingsGVR, ns, "p1", "the hook's status", func(o *unstructured.Unstructured) bool {
				return o != nil && statusField(o, "value") == "a"
			})
			if got := syncedCondition(obj) != nil; got != tc.want {
				t.Errorf("Synced condition present = %v, want %v: %v", got, tc.want, statusField(obj, "conditions"))
			}
		})
	}
}

// TestSyncedConditionIgnoreStatusChanges: with ignoreStatusChanges, the
// condition's own writes call the hook no more than the hook's status
// does: a label change later gives the hook the status it wrote first, with
// the condition in it.
func TestSyncedConditionIgnoreStatusChanges(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, stepHook)
	failWith500(hook)
	cc := optIn(isolated(compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["parentResource"].(map[string]any)["ignoreStatusChanges"] = true
	}), ns), "true")
	startController(t, cc)
	newParent(t, ns, "p1", nil)
	waitFor(t, thingsGVR, ns, "p1", "Synced=False HookFailed", hasSynced("False", engine.ReasonHookFailed))
	hook.answer(stepHook)
	waitFor(t, thingsGVR, ns, "p1", "step one and Synced=True", func(o *unstructured.Unstructured) bool {
		return hasSynced("True", engine.ReasonSynced)(o) && statusField(o, "step") == "one"
	})
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the hook to see the label", func(context.Context) (bool, error) {
		last := hook.lastRequest()
		return last != nil && last.Parent.GetLabels()["poke"] == "1", nil
	})
	given := hook.lastRequest().Parent
	if step, _, _ := unstructured.NestedString(given.Object, "status", "step"); step != "one" {
		t.Errorf("the label's sync was given step %q, want one: a sync ran in between", step)
	}
	if !hasSynced("True", engine.ReasonSynced)(given) {
		t.Errorf("the hook was not given the condition: %v", statusField(given, "conditions"))
	}
}

// TestSyncedConditionOnPrunedStatus: where the status schema prunes the
// condition's lastTransitionTime and observedGeneration, the Synced
// condition is still shown (False on a failing hook, True once it
// recovers, False again when it fails again) and written a bounded number
// of times: the fields metactl fills and the server drops are no change.
func TestSyncedConditionOnPrunedStatus(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "prunedthings"}
	ns := env.CreateNamespace(t)
	// A status the schema keeps whole.
	healthy := func(*syncRequest) any {
		return map[string]any{"status": map[string]any{"observedGeneration": 1}, "children": []any{}}
	}
	hook := newTestHook(t, healthy)
	failWith500(hook)
	cc := optIn(isolated(compositeController(t, hook, gvr, func(spec map[string]any) { spec["resyncPeriodSeconds"] = int64(1) }), ns), "true")
	limiter := &countingLimiter{delays: []time.Duration{20 * time.Millisecond}}
	writes0 := controllertest.Writes(cc.GetName(), "patch", "status")
	startController(t, cc, func(o *composite.Options) { o.RateLimiter = limiter })
	started := time.Now()
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "PrunedThing",
		"metadata": map[string]any{"name": "p1", "namespace": ns, "labels": map[string]any{"test": ns}},
		"spec":     map[string]any{"value": "a", "selector": map[string]any{"matchLabels": map[string]any{"parent": "p1"}}}}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx(t), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	obj := waitFor(t, gvr, ns, "p1", "Synced=False HookFailed", hasSynced("False", engine.ReasonHookFailed))
	if c := syncedCondition(obj); c["observedGeneration"] != nil || c["lastTransitionTime"] != nil {
		t.Fatalf("condition %v: the schema did not prune as the test expects", c)
	}
	testenv.Eventually(t, 30*time.Second, "20 failed hook calls", func(context.Context) (bool, error) {
		return hook.calls.Load() >= 20, nil
	})
	bound := func(extra float64) float64 {
		return extra + float64(time.Since(started)/engine.SyncedRewriteInterval)
	}
	if writes := controllertest.Writes(cc.GetName(), "patch", "status") - writes0; writes > bound(1) {
		t.Errorf("%v status writes during %d failing syncs, want at most %v", writes, hook.calls.Load(), bound(1))
	}

	hook.answer(healthy)
	waitFor(t, gvr, ns, "p1", "Synced=True after the hook recovered", hasSynced("True", engine.ReasonSynced))
	// Resyncs of a healthy parent write nothing.
	calls := hook.calls.Load()
	testenv.Eventually(t, 30*time.Second, "three resyncs", func(context.Context) (bool, error) {
		return hook.calls.Load() >= calls+3, nil
	})
	if writes := controllertest.Writes(cc.GetName(), "patch", "status") - writes0; writes > bound(2) {
		t.Errorf("%v status writes after the recovery and %d resyncs, want at most %v", writes, hook.calls.Load()-calls, bound(2))
	}
	// The condition is still written: failing again shows it.
	failWith500(hook)
	waitFor(t, gvr, ns, "p1", "Synced=False HookFailed again", hasSynced("False", engine.ReasonHookFailed))
}

// TestSyncedConditionVaryingError: a hook whose failures differ in their
// text at every call (a request id in a 500 body) does not get the
// condition written at every retry: a change that keeps its status and
// reason waits SyncedRewriteInterval like a change of the attempt alone.
func TestSyncedConditionVaryingError(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	var id atomic.Int64
	hook.setHandler(func(w http.ResponseWriter, _ *http.Request, _ *syncRequest) {
		http.Error(w, fmt.Sprintf("boom (request %d)", id.Add(1)), http.StatusInternalServerError)
	})
	cc := optIn(isolated(compositeController(t, hook, thingsGVR, nil), ns), "true")
	limiter := &countingLimiter{delays: []time.Duration{20 * time.Millisecond}}
	writes0 := controllertest.Writes(cc.GetName(), "patch", "status")
	startController(t, cc, func(o *composite.Options) { o.RateLimiter = limiter })
	started := time.Now()
	newParent(t, ns, "p1", map[string]any{"value": "a"})
	waitFor(t, thingsGVR, ns, "p1", "Synced=False HookFailed", hasSynced("False", engine.ReasonHookFailed))
	testenv.Eventually(t, 30*time.Second, "20 failed hook calls", func(context.Context) (bool, error) {
		return hook.calls.Load() >= 20, nil
	})
	writes := controllertest.Writes(cc.GetName(), "patch", "status") - writes0
	if bound := 1 + float64(time.Since(started)/engine.SyncedRewriteInterval); writes > bound {
		t.Errorf("%v status writes during %d syncs failing with different texts, want at most %v", writes, hook.calls.Load(), bound)
	}
}
