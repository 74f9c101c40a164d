//go:build integration

package composite_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
)

// daemonJobHook acts on the status it wrote itself, like metacontroller's
// DaemonJob example: it asks for a child and reports Complete; given a
// status that says Complete, it asks for no child.
func daemonJobHook(req *syncRequest) any {
	if phase, _, _ := unstructured.NestedString(req.Parent.Object, "status", "phase"); phase == "Complete" {
		return map[string]any{"children": []any{}, "status": map[string]any{"phase": "Complete"}}
	}
	return map[string]any{
		"children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-job", map[string]any{"x": "y"})},
		"status":   map[string]any{"phase": "Complete"},
	}
}

// TestHookActingOnItsOwnStatusConverges: with nothing happening outside,
// the hook is called again with the status it asked for, and its child is
// gone once that status says Complete.
func TestHookActingOnItsOwnStatusConverges(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, daemonJobHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", nil)
	waitFor(t, thingsGVR, ns, "p1", "status Complete", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "phase") == "Complete"
	})
	// Within one sync: no event from outside is needed.
	testenv.Eventually(t, 10*time.Second, "the child created and then deleted", func(ctx context.Context) (bool, error) {
		_, err := get(t, configMapsGVR, ns, "p1-job")
		created := false
		for _, r := range hook.requestsSnapshot() {
			created = created || len(r.Children["ConfigMap.v1"]) > 0
		}
		return created && err != nil, nil
	})
	// In one sync: not by a retry after the hook failed to settle.
	if got := controllertest.Unsettled(cc.GetName()); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0: the hook was not given the status it asked for", got)
	}
}

// stepHook moves status.step from "" to one to two and stays there.
func stepHook(req *syncRequest) any {
	step, _, _ := unstructured.NestedString(req.Parent.Object, "status", "step")
	next := map[string]string{"": "one", "one": "two", "two": "two"}[step]
	return map[string]any{"children": []any{}, "status": map[string]any{"step": next}}
}

// TestStatusOnlyAnswersSettle: a hook whose status depends on its own
// status is called until it answers what it was given, in one sync.
func TestStatusOnlyAnswersSettle(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, stepHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", nil)
	waitFor(t, thingsGVR, ns, "p1", "step two", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "step") == "two"
	})
	// The cache can have the status before the write's response is back:
	// the write is counted when the sync ends.
	testenv.Eventually(t, 5*time.Second, "the sync to end", func(context.Context) (bool, error) {
		return controllertest.Syncs(cc.GetName(), "success") >= 1, nil
	})
	if got := hook.calls.Load(); got != 3 {
		t.Errorf("hook calls = %d, want 3 (one, two, and two again: the fixed point)", got)
	}
	if got := controllertest.Writes(cc.GetName(), "patch", "status"); got != 1 {
		t.Errorf("status writes = %v, want 1 (the status of the fixed point)", got)
	}
}

// TestIgnoreStatusChangesIgnoresOwnStatus: with ignoreStatusChanges, the
// status the hook asked for does not call it again, as metacontroller does
// not re-sync on a status-only change either.
func TestIgnoreStatusChangesIgnoresOwnStatus(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, stepHook)
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["parentResource"].(map[string]any)["ignoreStatusChanges"] = true
	}))
	newThing(t, thingsGVR, ns, "p1", nil)
	waitFor(t, thingsGVR, ns, "p1", "step one", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "step") == "one"
	})
	// A label change syncs; the hook must find the status it wrote first,
	// untouched by any sync in between.
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", types.MergePatchType, []byte(`{"metadata":{"labels":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the hook to see the label", func(context.Context) (bool, error) {
		last := hook.lastRequest()
		return last != nil && last.Parent.GetLabels()["poke"] == "1", nil
	})
	requests := hook.requestsSnapshot()
	if len(requests) != 2 {
		t.Fatalf("hook calls = %d, want 2 (the create, the label)", len(requests))
	}
	if step, _, _ := unstructured.NestedString(requests[1].Parent.Object, "status", "step"); step != "one" {
		t.Errorf("the label's sync was given step %q, want one", step)
	}
}

// countingLimiter spaces retries by delays[i] for the i-th retry (the last
// delay for the rest) and counts them.
type countingLimiter struct {
	mu     sync.Mutex
	delays []time.Duration
	when   atomic.Int64
}

func (l *countingLimiter) When(engine.Key) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := int(l.when.Add(1)) - 1
	return l.delays[min(i, len(l.delays)-1)]
}
func (l *countingLimiter) Forget(engine.Key)          {}
func (l *countingLimiter) NumRequeues(engine.Key) int { return int(l.when.Load()) }

// TestUnsettledHookGoesThroughTheRateLimiter: a hook that never settles (a
// counter in status) is called engine.MaxRounds times in a sync, its
// last status is written, and the parent is retried through the rate
// limiter, reported by an Event and a metric, never in a hot loop.
func TestUnsettledHookGoesThroughTheRateLimiter(t *testing.T) {
	ns := env.CreateNamespace(t)
	var n atomic.Int64
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"n": n.Add(1)}}
	})
	// One quick retry, then none within the test.
	limiter := &countingLimiter{delays: []time.Duration{50 * time.Millisecond, time.Hour}}
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc, func(o *composite.Options) { o.RateLimiter = limiter })
	newThing(t, thingsGVR, ns, "p1", nil)
	waitForEvent(t, ns, "p1", "HookNotSettled", "still asked for changes")
	testenv.Eventually(t, 30*time.Second, "two syncs, each retried through the rate limiter", func(context.Context) (bool, error) {
		return limiter.when.Load() == 2, nil
	})
	want := int64(2 * engine.MaxRounds)
	if got := hook.calls.Load(); got != want {
		t.Errorf("hook calls = %d, want %d (two syncs of %d calls)", got, want, engine.MaxRounds)
	}
	if got := controllertest.Unsettled(cc.GetName()); got != 2 {
		t.Errorf("metactl_syncs_unsettled_total = %v, want 2", got)
	}
	waitFor(t, thingsGVR, ns, "p1", "the last answer's status", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "n") == want
	})
}

// TestRollingRoundsEndAtAWrite: a rolling parent's sync that writes a
// ControllerRevision ends there (a second round would read revisions the
// cache has not caught up with, and conflict); the status write's own
// event then gives the hook the status it asked for. No sync fails.
func TestRollingRoundsEndAtAWrite(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, rollingHook)
	cc := rollingController(t, hook, "RollingInPlace")
	startController(t, cc)
	syncs := func(result string) float64 {
		return controllertest.Syncs(cc.GetName(), result)
	}
	newThing(t, thingsGVR, ns, "p1", map[string]any{"replicas": 0, "version": "v1"})
	// The first sync writes the revision and the status; the second is
	// given that status, and settles.
	testenv.Eventually(t, 10*time.Second, "two successful syncs", func(context.Context) (bool, error) { return syncs("success") >= 2, nil })
	waitFor(t, thingsGVR, ns, "p1", "status version v1", func(o *unstructured.Unstructured) bool { return statusField(o, "version") == "v1" })
	if got := hook.calls.Load(); got != 2 {
		t.Errorf("hook calls = %d, want 2 (one per sync)", got)
	}
	if last := hook.lastRequest(); last == nil || statusField(last.Parent, "version") != "v1" {
		t.Error("the last hook call was not given the status it asked for")
	}
	// A new revision with no child to move: the same, again.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	testenv.Eventually(t, 10*time.Second, "two more successful syncs", func(context.Context) (bool, error) { return syncs("success") >= 4, nil })
	waitFor(t, thingsGVR, ns, "p1", "status version v2", func(o *unstructured.Unstructured) bool { return statusField(o, "version") == "v2" })
	if got := syncs("error"); got != 0 {
		t.Errorf("failed syncs = %v, want 0", got)
	}
	// The spec change's sync calls the hook once per revision (the new
	// one, and the old one it then deletes, having no children); the
	// status's sync once.
	if got := hook.calls.Load(); got != 5 {
		t.Errorf("hook calls = %d, want 5", got)
		for i, r := range hook.requestsSnapshot() {
			t.Logf("call %d: generation %d, status %v", i+1, r.Parent.GetGeneration(), r.Parent.Object["status"])
		}
	}
}

// TestSyncErrorSaysWhenItRetries: the SyncError Event of a failing hook
// names the controller once and says when the parent is retried.
func TestSyncErrorSaysWhenItRetries(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		http.Error(w, "broken on purpose", http.StatusInternalServerError)
	})
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	newThing(t, thingsGVR, ns, "p1", nil)
	waitForEvent(t, ns, "p1", "SyncError", "compositecontroller "+cc.GetName()+": sync hook")
	waitForEvent(t, ns, "p1", "SyncError", "broken on purpose\" (retrying in ")
}
