//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/composite"
)

// recorded starts a controller for cc that records its syncs.
func recorded(t *testing.T, cc *unstructured.Unstructured) *composite.Controller {
	t.Helper()
	return startController(t, cc, func(o *composite.Options) {
		o.History = history.NewStore(history.StoreOptions{SyncsPerObject: 50})
	})
}

// waitForSync polls the record of the object queued as key for a sync
// that check accepts, and returns it.
func waitForSync(t *testing.T, c *composite.Controller, key, what string, check func(s *history.Sync) bool) *history.Sync {
	t.Helper()
	return controllertest.WaitForSync(t, c.History, key, what, check)
}

// firstTrigger accepts a sync whose first trigger is want.
func firstTrigger(want trigger.Trigger) func(*history.Sync) bool {
	return func(s *history.Sync) bool { return len(s.Triggers) > 0 && s.Triggers[0] == want }
}

// hasTrigger accepts a sync with the trigger want.
func hasTrigger(want trigger.Trigger) func(*history.Sync) bool {
	return func(s *history.Sync) bool { return slices.Contains(s.Triggers, want) }
}

func describeSyncs(syncs []*history.Sync) string {
	var b strings.Builder
	for _, s := range syncs {
		fmt.Fprintf(&b, "\n  %v calls %+v writes %+v outcome %+v", s.Triggers, s.Calls, s.Writes, s.Outcome)
	}
	return b.String()
}

// TestSyncRecordOfAChangeOfTheParentAndOfAChild: a new parent is synced
// for its change (object, generation 1), and the record shows the hook
// call and the writes with their targets; a spec change is object with
// generation 2; a child changed by hand is dependent, naming the child.
// The metric counts each under its first trigger.
func TestSyncRecordOfAChangeOfTheParentAndOfAChild(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	c := recorded(t, cc)
	newThing(t, thingsGVR, ns, "p", map[string]any{"value": "v1"})
	key := ns + "/p"

	created := waitForSync(t, c, key, "the sync of the new parent", firstTrigger(trigger.Trigger{Cause: trigger.CauseObject, Generation: 1}))
	if len(created.Calls) == 0 || created.Calls[0].Hook != "sync" || created.Calls[0].Result != "200" || created.Calls[0].Error != "" {
		t.Errorf("the sync's calls %+v, want the sync hook answering 200", created.Calls)
	}
	want := []history.Write{
		{Verb: "create", Target: "child", Object: "configmaps/" + ns + "/p-cm"},
		{Verb: "patch", Target: "status", Object: "things.test.metactl.io/" + ns + "/p"},
	}
	if !slices.Equal(created.Writes, want) {
		t.Errorf("the sync's writes %+v, want %+v", created.Writes, want)
	}
	if o := created.Outcome; o.Result != "success" || o.Error != "" || o.Attempt != 0 || !o.NextAttempt.IsZero() {
		t.Errorf("outcome %+v, want success and no next attempt", o)
	}
	if created.Duration <= 0 || created.Start.IsZero() {
		t.Errorf("start %v, duration %v", created.Start, created.Duration)
	}

	setSpec(t, thingsGVR, ns, "p", map[string]any{"value": "v2"})
	changed := waitForSync(t, c, key, "the sync of the spec change", firstTrigger(trigger.Trigger{Cause: trigger.CauseObject, Generation: 2}))
	if want := (history.Write{Verb: "update", Target: "child", Object: "configmaps/" + ns + "/p-cm"}); !slices.Contains(changed.Writes, want) {
		t.Errorf("the spec change's writes %+v, want %+v", changed.Writes, want)
	}

	before := controllertest.SyncsFor(cc.GetName(), "success", trigger.CauseDependent)
	patch := []byte(`{"data":{"value":"by hand"}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "p-cm", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForSync(t, c, key, "the sync of the child's change", firstTrigger(trigger.Trigger{Cause: trigger.CauseDependent, Object: "configmaps/" + ns + "/p-cm"}))
	if n := controllertest.SyncsFor(cc.GetName(), "success", trigger.CauseDependent); n <= before {
		t.Errorf("metactl_syncs_total{trigger=dependent} = %v, was %v: the child's change not counted", n, before)
	}
	if n := controllertest.SyncsFor(cc.GetName(), "success", trigger.CauseObject); n < 2 {
		t.Errorf("metactl_syncs_total{trigger=object} = %v, want at least 2", n)
	}
}

// TestSyncRecordOfAFailingHook: a hook failing with 500 gives a record
// with the call's code and error, the outcome error with its attempt and
// next attempt; the retry is recorded as such, up to the recovery.
func TestSyncRecordOfAFailingHook(t *testing.T) {
	ns := env.CreateNamespace(t)
	var failures atomic.Int64
	failures.Store(2)
	hook := newTestHook(t, valueHook)
	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		if failures.Add(-1) >= 0 {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_ = jsonEncode(w, valueHook(req))
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	c := recorded(t, cc)
	newThing(t, thingsGVR, ns, "p", map[string]any{"value": "v1"})
	key := ns + "/p"
	waitForSync(t, c, key, "the recovery", func(s *history.Sync) bool { return s.Outcome.Result == "success" })

	syncs := c.History(key)
	slices.Reverse(syncs) // oldest first
	if len(syncs) < 3 {
		t.Fatalf("recorded %d syncs, want 2 failures and a success:%s", len(syncs), describeSyncs(syncs))
	}
	for i, s := range syncs[:2] {
		o := s.Outcome
		if o.Result != "error" || !strings.Contains(o.Error, "HTTP 500") || o.Attempt != i+1 || o.Reason != engine.ReasonHookFailed {
			t.Errorf("failure %d: outcome %+v, want error (HTTP 500), attempt %d", i+1, o, i+1)
		}
		if end := s.Start.Add(s.Duration); !o.NextAttempt.After(end) || o.NextAttempt.After(end.Add(5*time.Second)) {
			t.Errorf("failure %d: next attempt %v, want within the backoff after its end %v", i+1, o.NextAttempt, end)
		}
		if len(s.Calls) != 1 || s.Calls[0].Result != "500" || !strings.Contains(s.Calls[0].Error, "boom") {
			t.Errorf("failure %d: calls %+v, want one answered 500 with its error", i+1, s.Calls)
		}
		if len(s.Writes) != 0 {
			t.Errorf("failure %d: writes %+v, want none", i+1, s.Writes)
		}
	}
	if want := (trigger.Trigger{Cause: trigger.CauseObject, Generation: 1}); syncs[0].Triggers[0] != want {
		t.Errorf("the first sync's triggers %v, want %v first", syncs[0].Triggers, want)
	}
	for i, s := range syncs[1:3] {
		if !slices.Contains(s.Triggers, trigger.Trigger{Cause: trigger.CauseRetry}) {
			t.Errorf("sync %d after a failure: triggers %v, want a retry", i+2, s.Triggers)
		}
	}
	if o := syncs[2].Outcome; o.Attempt != 0 || o.Error != "" || o.Reason != engine.ReasonSynced {
		t.Errorf("the recovery's outcome %+v, want no attempt, no error", o)
	}
	if n := controllertest.SyncsFor(cc.GetName(), "error", trigger.CauseRetry); n < 1 {
		t.Errorf("metactl_syncs_total{result=error,trigger=retry} = %v, want the second failure", n)
	}
}

// TestSyncRecordOfResyncs: resyncPeriodSeconds is resync;
// resyncAfterSeconds is resync-after, the next attempt of the sync that
// asked for it.
func TestSyncRecordOfResyncs(t *testing.T) {
	t.Run("resyncPeriodSeconds", func(t *testing.T) {
		ns := env.CreateNamespace(t)
		hook := newTestHook(t, valueHook)
		cc := compositeController(t, hook, thingsGVR, func(spec map[string]any) { spec["resyncPeriodSeconds"] = int64(1) })
		c := recorded(t, cc)
		newThing(t, thingsGVR, ns, "p", nil)
		waitForSync(t, c, ns+"/p", "a periodic resync", firstTrigger(trigger.Trigger{Cause: trigger.CauseResync}))
		if n := controllertest.SyncsFor(cc.GetName(), "success", trigger.CauseResync); n < 1 {
			t.Errorf("metactl_syncs_total{trigger=resync} = %v", n)
		}
	})
	t.Run("resyncAfterSeconds", func(t *testing.T) {
		ns := env.CreateNamespace(t)
		hook := newTestHook(t, func(req *syncRequest) any {
			return map[string]any{"children": []any{}, "resyncAfterSeconds": 0.3}
		})
		cc := compositeController(t, hook, thingsGVR, nil)
		c := recorded(t, cc)
		newThing(t, thingsGVR, ns, "p", nil)
		resync := waitForSync(t, c, ns+"/p", "a resync the hook asked for", firstTrigger(trigger.Trigger{Cause: trigger.CauseResyncAfter}))
		if next := c.History(ns + "/p")[0].Outcome.NextAttempt; next.IsZero() {
			t.Error("a sync whose hook asked for resyncAfterSeconds has no next attempt")
		}
		if o := resync.Outcome; o.Result != "success" || o.NextAttempt.Sub(resync.Start.Add(resync.Duration)) != 300*time.Millisecond {
			t.Errorf("outcome %+v, want success, next attempt 0.3s after its end", o)
		}
		if n := controllertest.SyncsFor(cc.GetName(), "success", trigger.CauseResyncAfter); n < 1 {
			t.Errorf("metactl_syncs_total{trigger=resync-after} = %v", n)
		}
	})
}

// TestSyncRecordOfAStart: a controller started over existing parents syncs
// each for its start.
func TestSyncRecordOfAStart(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	newThing(t, thingsGVR, ns, "p", nil)
	c := recorded(t, cc)
	s := waitForSync(t, c, ns+"/p", "the start's sync", func(s *history.Sync) bool { return true })
	syncs := c.History(ns + "/p")
	if first := syncs[len(syncs)-1]; !slices.Equal(first.Triggers, []trigger.Trigger{{Cause: trigger.CauseStart}}) {
		t.Errorf("the first sync's triggers %v, want start", first.Triggers)
	}
	_ = s
	if n := controllertest.SyncsFor(cc.GetName(), "success", trigger.CauseStart); n < 1 {
		t.Errorf("metactl_syncs_total{trigger=start} = %v", n)
	}
}

// TestSyncRecordOfARelatedChange: a change of a related object is related,
// naming it; a parent that did not declare it gets no such trigger.
func TestSyncRecordOfARelatedChange(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		source, _, _ := unstructured.NestedString(parent.Object, "spec", "source")
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{source}}}}
	})
	c := recorded(t, relatedController(t, h, thingsGVR, "v1"))
	createValueConfigMap(t, ns, "source-a", "a1", nil)
	newThing(t, thingsGVR, ns, "pa", map[string]any{"source": "source-a"})
	waitFor(t, thingsGVR, ns, "pa", "sees source-a", func(o *unstructured.Unstructured) bool { return relatedStatus(o)["source-a"] == "a1" })
	setValue(t, ns, "source-a", "a2")
	waitForSync(t, c, ns+"/pa", "the sync for the related change", hasTrigger(trigger.Trigger{Cause: trigger.CauseRelated, Object: "configmaps/" + ns + "/source-a"}))
}

// TestRecordOfAGoneParentIsForgotten: the sync that finds a parent gone
// drops its record.
func TestRecordOfAGoneParentIsForgotten(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	c := recorded(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p", nil)
	waitForSync(t, c, ns+"/p", "a sync", func(*history.Sync) bool { return true })
	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the record forgotten", func(context.Context) (bool, error) {
		return c.History(ns+"/p") == nil, nil
	})
}

// TestNextAttemptOfAnUnsettledHookWithResyncAfter: a hook that does not
// settle and asks for resyncAfterSeconds sooner than the backoff's retry
// is synced again at that time, and the record's next attempt says so.
func TestNextAttemptOfAnUnsettledHookWithResyncAfter(t *testing.T) {
	ns := env.CreateNamespace(t)
	var calls atomic.Int64
	hook := newTestHook(t, func(req *syncRequest) any {
		// A status that changes on every call never settles.
		return map[string]any{"children": []any{}, "status": map[string]any{"n": calls.Add(1)}, "resyncAfterSeconds": 0.05}
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	c := recorded(t, cc)
	newThing(t, thingsGVR, ns, "p", nil)
	s := waitForSync(t, c, ns+"/p", "a sync that waits", func(s *history.Sync) bool { return s.Outcome.Result == "waiting" })
	end := s.Start.Add(s.Duration)
	// The backoff's first retry is 250ms after the end; resyncAfterSeconds
	// 50ms.
	if next := s.Outcome.NextAttempt; next.Before(end) || next.After(end.Add(100*time.Millisecond)) {
		t.Errorf("next attempt %v after the end of the waiting sync, want resyncAfterSeconds' 50ms", next.Sub(end))
	}
}
