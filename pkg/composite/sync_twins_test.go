package composite

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
)

// More fast twins (no API server) of this package's tagged tests, in the
// style of sync_rules_test.go; each names the tagged test it mirrors.

// syncOK is c.SyncOnce of the parent as the store has it now, failing t
// on an error.
func syncOK(t *testing.T, c *Controller, cluster *ruletest.Cluster) {
	t.Helper()
	if _, err := c.SyncOnce(t.Context(), stored(cluster, ruleThings, "p")); err != nil {
		t.Fatalf("SyncOnce: %v", err)
	}
}

// countWrites is how many of the cluster's writes are want.
func countWrites(cluster *ruletest.Cluster, want string) int {
	n := 0
	for _, w := range cluster.Writes() {
		if w == want {
			n++
		}
	}
	return n
}

// TestEmptyOrNullChildrenListDeletesEveryChild: an answer whose children
// list is empty, or null, is how a hook asks for no children: the
// parent's child is deleted and the answer's status written. Twin of
// TestEmptyChildrenDeletes (answers_test.go).
func TestEmptyOrNullChildrenListDeletesEveryChild(t *testing.T) {
	for name, list := range map[string]any{"empty": []any{}, "null": nil} {
		t.Run(name, func(t *testing.T) {
			parent := syncParent()
			h := ruletest.NewHook(t, func(map[string]any) any {
				return map[string]any{"status": map[string]any{"value": "none"}, "children": list}
			})
			c, cluster := syncCluster(t, h, nil, nil, nil, parent, syncChild("keep", "old", parent))
			syncOK(t, c, cluster)
			if keep := stored(cluster, ruleConfigMaps, "keep"); keep != nil {
				t.Errorf("child keep is still there; writes %v", cluster.Writes())
			}
			if st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any); st["value"] != "none" {
				t.Errorf("status %v, want the answer's value: none", st)
			}
		})
	}
}

// TestLaterRoundWithoutChildrenKeepsTheFirstRound: within one sync, the
// answer of a later round (the hook given the child the first created)
// without a children list is refused: the sync fails, the first round's
// child and status stay. Twin of TestLaterRoundWithoutChildrenIsRefused
// (answers_test.go).
func TestLaterRoundWithoutChildrenKeepsTheFirstRound(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(req map[string]any) any {
		if observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any); len(observed) == 0 {
			return map[string]any{"status": map[string]any{"phase": "one"}, "children": []any{answerChild("cm", "v")}}
		}
		return map[string]any{"status": map[string]any{"phase": "two"}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	_, err := c.SyncOnce(t.Context(), parent)
	if err == nil || !strings.Contains(err.Error(), "sync hook answer refused") {
		t.Errorf("SyncOnce: %v, want the later answer refused", err)
	}
	if n := len(h.Requests()); n < 2 {
		t.Fatalf("%d hook calls, want a second round", n)
	}
	if stored(cluster, ruleConfigMaps, "cm") == nil {
		t.Errorf("the first round's child is gone; writes %v", cluster.Writes())
	}
	if st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any); st["phase"] != "one" {
		t.Errorf("status %v, want the first round's phase: one", st)
	}
}

// TestRepeatedChildResourceRunsWithTheLaterMethod: a resource listed
// twice in childResources runs with the later entry's update method
// (InPlace after OnDelete: a changed child is updated), and a Warning
// DuplicateResource Event on the controller says so. Twin of
// TestRepeatedChildResource (composite_test.go).
func TestRepeatedChildResourceRunsWithTheLaterMethod(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{answerChild("keep", "b")}} })
	c, cluster := syncCluster(t, h, nil, func(spec map[string]any) {
		configMaps := func(method string) map[string]any {
			return map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": method}}
		}
		spec["childResources"] = []any{configMaps("OnDelete"), configMaps("InPlace")}
	}, nil, parent, syncChild("keep", "a", parent))
	syncOK(t, c, cluster)
	if keep := stored(cluster, ruleConfigMaps, "keep"); keep == nil || keep.Object["data"].(map[string]any)["v"] != "b" {
		t.Errorf("child keep is %v, want it updated in place to b", keep)
	}
	events := cluster.Events()
	if !slices.ContainsFunc(events, func(e string) bool {
		return strings.HasPrefix(e, "Warning "+engine.ReasonDuplicateResource+" ") &&
			strings.Contains(e, "spec.childResources[1] lists v1 configmaps again")
	}) {
		t.Errorf("events %q, want a Warning %s naming spec.childResources[1]", events, engine.ReasonDuplicateResource)
	}
}

// TestHookThatClosesTheConnectionIsReported: a hook that closes the
// connection without answering fails the sync with an error that says
// so (did it crash?), naming the hook, and nothing is
// written. Twin of TestHookCrashIsReported (answers_test.go).
func TestHookThatClosesTheConnectionIsReported(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole request read first: the hook dies after it, not while
		// the client is still writing it.
		_, _ = io.Copy(io.Discard, r.Body)
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(server.Close)
	parent := syncParent()
	c, cluster := syncCluster(t, &ruletest.Hook{URL: server.URL}, nil, nil, nil, parent, syncChild("keep", "old", parent))
	_, err := c.SyncOnce(t.Context(), parent)
	cluster.Refused(t, err, "sync hook "+server.URL+"/sync: the hook closed the connection without answering (did it crash?)")
}

// readyAnswer answers no children and a Ready condition of status, with
// neither lastTransitionTime nor observedGeneration.
func readyAnswer(status string) func(map[string]any) any {
	return func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": status, "reason": "Fine"}}}}
	}
}

// readyCondition is the parent's Ready condition in obj (a parent, or a
// hook's request's parent), nil if it has none.
func readyCondition(obj map[string]any) map[string]any {
	st, _ := obj["status"].(map[string]any)
	conditions, _ := st["conditions"].([]any)
	for _, c := range conditions {
		if c, _ := c.(map[string]any); c["type"] == "Ready" {
			return c
		}
	}
	return nil
}

// TestConditionsWithoutTimesSettleInTwoCalls: conditions answered without
// lastTransitionTime get it (and observedGeneration) filled; the hook is
// given them in the next round and the sync settles there: two calls, one
// status write; a later sync with the same answer writes nothing. Twin of
// TestConditionsReachAFixedPoint (hookevents_test.go).
func TestConditionsWithoutTimesSettleInTwoCalls(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, readyAnswer("True"))
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	syncOK(t, c, cluster)
	ready := readyCondition(stored(cluster, ruleThings, "p").Object)
	if ready == nil || ready["lastTransitionTime"] == nil || ready["observedGeneration"] != int64(3) {
		t.Errorf("Ready = %v: want lastTransitionTime and observedGeneration 3 filled", ready)
	}
	requests := h.Requests()
	if len(requests) != 2 {
		t.Fatalf("hook calls = %d, want 2 (the conditions, the same again: the fixed point)", len(requests))
	}
	if given := readyCondition(requests[1]["parent"].(map[string]any)); given == nil || given["lastTransitionTime"] != ready["lastTransitionTime"] {
		t.Errorf("the second call was given Ready %v, want the filled one %v", given, ready)
	}
	syncOK(t, c, cluster)
	if n := countWrites(cluster, "patch things/status ns/p"); n != 1 {
		t.Errorf("status writes = %d after two syncs, want 1; writes %v", n, cluster.Writes())
	}
}

// TestConditionsWrittenWithoutTimesCostNoWrite: a parent whose conditions
// were written without lastTransitionTime and observedGeneration (by
// metacontroller, say) is not written only to add them when the hook
// answers the status it has; once the status changes, they are filled.
// Twin of TestConditionsWithoutTimesCostNoWrite (hookevents_test.go).
func TestConditionsWrittenWithoutTimesCostNoWrite(t *testing.T) {
	parent := syncParent()
	parent.Object["status"] = map[string]any{"observedGeneration": int64(3),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Fine"}}}
	var status atomic.Value
	status.Store("True")
	h := ruletest.NewHook(t, func(req map[string]any) any { return readyAnswer(status.Load().(string))(req) })
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	syncOK(t, c, cluster)
	if w := cluster.Writes(); len(w) != 0 {
		t.Errorf("writes %v, want none: the hook answered the status the parent has", w)
	}
	status.Store("False")
	syncOK(t, c, cluster)
	ready := readyCondition(stored(cluster, ruleThings, "p").Object)
	if ready == nil || ready["status"] != "False" || ready["lastTransitionTime"] == nil || ready["observedGeneration"] != int64(3) {
		t.Errorf("Ready = %v: want False, lastTransitionTime and observedGeneration filled once the status changed", ready)
	}
}

// TestHookActingOnItsOwnStatusConvergesInOneSync: a hook that creates a
// child until its status says Complete, then asks for none, is given the
// status it asked for in the next round of the same sync: the child is
// created and deleted again, and the sync ends settled. Twin of
// TestHookActingOnItsOwnStatusConverges (fixedpoint_test.go).
func TestHookActingOnItsOwnStatusConvergesInOneSync(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(req map[string]any) any {
		if st, _ := req["parent"].(map[string]any)["status"].(map[string]any); st["phase"] == "Complete" {
			return map[string]any{"children": []any{}, "status": map[string]any{"phase": "Complete"}}
		}
		return map[string]any{"children": []any{answerChild("job", "y")}, "status": map[string]any{"phase": "Complete"}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	syncOK(t, c, cluster)
	if n := countWrites(cluster, "create configmaps ns/job"); n != 1 {
		t.Errorf("writes %v, want the child created once", cluster.Writes())
	}
	if stored(cluster, ruleConfigMaps, "job") != nil {
		t.Errorf("the child is still there once the status says Complete; writes %v", cluster.Writes())
	}
	if st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any); st["phase"] != "Complete" {
		t.Errorf("status %v, want phase Complete", st)
	}
}

// TestStatusOnlyAnswersSettleInOneSync: a hook whose status depends on its
// own status (step "" to one to two, then two) is called until it answers
// what it was given, in one sync: three calls, one status write. Twin of
// TestStatusOnlyAnswersSettle (fixedpoint_test.go).
func TestStatusOnlyAnswersSettleInOneSync(t *testing.T) {
	parent := syncParent()
	parent.Object["status"] = map[string]any{}
	h := ruletest.NewHook(t, func(req map[string]any) any {
		st, _ := req["parent"].(map[string]any)["status"].(map[string]any)
		step, _ := st["step"].(string)
		next := map[string]string{"": "one", "one": "two", "two": "two"}[step]
		return map[string]any{"children": []any{}, "status": map[string]any{"step": next}}
	})
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	syncOK(t, c, cluster)
	if n := len(h.Requests()); n != 3 {
		t.Errorf("hook calls = %d, want 3 (one, two, and two again: the fixed point)", n)
	}
	if w := cluster.Writes(); !slices.Equal(w, []string{"patch things/status ns/p"}) {
		t.Errorf("writes %v, want one status write (the fixed point's)", w)
	}
	if st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any); st["step"] != "two" {
		t.Errorf("status %v, want step two", st)
	}
}

// syncedOf is the Synced condition of the parent in the store, nil when
// it has none.
func syncedOf(cluster *ruletest.Cluster) map[string]any {
	st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any)
	conditions, _ := st["conditions"].([]any)
	for _, c := range conditions {
		if c, _ := c.(map[string]any); c["type"] == engine.SyncedConditionType {
			return c
		}
	}
	return nil
}

// TestSyncedConditionIsWrittenOnceForARepeatedFailure: a failing hook
// makes the parent Synced=False HookFailed, with a message naming the
// hook and its HTTP status and the condition's times filled; a second
// sync failing alike does not write it again; a recovered hook makes it
// True. Twin of TestSyncedConditionShowsFailureAndRecovery (synced_test.go).
func TestSyncedConditionIsWrittenOnceForARepeatedFailure(t *testing.T) {
	parent := syncParent()
	var fail atomic.Bool
	fail.Store(true)
	h := ruletest.NewHook(t, func(map[string]any) any {
		if fail.Load() {
			return ruletest.HTTPError(500)
		}
		return map[string]any{"children": []any{}, "status": map[string]any{"old": true}}
	})
	c, cluster := syncCluster(t, h, nil, nil, map[string]string{engine.SyncedConditionAnnotation: "true"}, parent)
	for range 2 {
		if _, err := c.SyncOnce(t.Context(), stored(cluster, ruleThings, "p")); err == nil {
			t.Fatal("SyncOnce of a failing hook succeeded")
		}
	}
	synced := syncedOf(cluster)
	msg, _ := synced["message"].(string)
	if synced["status"] != "False" || synced["reason"] != engine.ReasonHookFailed ||
		!strings.Contains(msg, "sync hook "+h.URL) || !strings.Contains(msg, "HTTP 500") ||
		synced["lastTransitionTime"] == nil || synced["observedGeneration"] == nil {
		t.Errorf("Synced = %v, want False %s naming the hook and HTTP 500, its times filled", synced, engine.ReasonHookFailed)
	}
	if n := countWrites(cluster, "patch things/status ns/p"); n != 1 {
		t.Errorf("status written %d times by two syncs failing alike, want 1", n)
	}
	fail.Store(false)
	syncOK(t, c, cluster)
	if synced := syncedOf(cluster); synced["status"] != "True" {
		t.Errorf("Synced = %v after the hook recovered, want True", synced)
	}
}

// TestSyncedConditionIsOptInWithoutAServer: a failing sync writes the
// Synced condition only when the controller opts in: not by default, for
// every controller with Options.SyncedCondition, and not for one
// annotated "false" even then. Twin of TestSyncedConditionIsOptIn
// (synced_test.go).
func TestSyncedConditionIsOptInWithoutAServer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation map[string]string
		option     bool
		want       bool
	}{
		{"default", nil, false, false},
		{"option", nil, true, true},
		{"option-annotation-false", map[string]string{engine.SyncedConditionAnnotation: "false"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := syncParent()
			h := ruletest.NewHook(t, func(map[string]any) any { return ruletest.HTTPError(500) })
			cluster := ruletest.NewCluster(ruleResources(t), []schema.GroupVersionResource{ruleThings}, parent)
			cluster.Options.SyncedCondition = tc.option
			c := startSync(t, cluster, h, nil, nil, tc.annotation)
			if _, err := c.SyncOnce(t.Context(), parent); err == nil {
				t.Fatal("SyncOnce of a failing hook succeeded")
			}
			if got := syncedOf(cluster) != nil; got != tc.want {
				t.Errorf("Synced condition present = %v, want %v; writes %v", got, tc.want, cluster.Writes())
			}
		})
	}
}

// TestSyncedConditionNextToTheHooksOwn: a hook that answers its own
// conditions keeps them next to Synced (True), and a later sync with the
// same answer calls it once and writes nothing (no ping-pong between the
// hook's status and metactl's condition). Twin
// of TestSyncedConditionWithTheHooksOwnConditions (synced_test.go).
func TestSyncedConditionNextToTheHooksOwn(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"children": []any{}, "status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Fine", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}}
	})
	c, cluster := syncCluster(t, h, nil, nil, map[string]string{engine.SyncedConditionAnnotation: "true"}, parent)
	syncOK(t, c, cluster)
	st, _ := stored(cluster, ruleThings, "p").Object["status"].(map[string]any)
	if list, _ := st["conditions"].([]any); len(list) != 2 || list[0].(map[string]any)["type"] != "Ready" ||
		syncedOf(cluster)["status"] != "True" {
		t.Errorf("conditions %v, want Ready then Synced True", st["conditions"])
	}
	writes, calls := len(cluster.Writes()), len(h.Requests())
	syncOK(t, c, cluster)
	if n := len(h.Requests()) - calls; n != 1 {
		t.Errorf("hook calls = %d in a second sync of the same answer, want 1", n)
	}
	if w := cluster.Writes()[writes:]; len(w) != 0 {
		t.Errorf("a second sync of the same answer wrote %v", w)
	}
}

// TestSyncedConditionNotRewrittenForAVaryingErrorText: a hook whose
// failures differ in their text at each call (a request id) does not get
// the condition written again at the next failing sync: a change of the
// message alone waits SyncedRewriteInterval. Twin of
// TestSyncedConditionVaryingError (synced_test.go).
func TestSyncedConditionNotRewrittenForAVaryingErrorText(t *testing.T) {
	parent := syncParent()
	var id atomic.Int64
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "boom (request "+strconv.FormatInt(id.Add(1), 10)+")", http.StatusInternalServerError)
	}))
	t.Cleanup(server.Close)
	c, cluster := syncCluster(t, &ruletest.Hook{URL: server.URL}, nil, nil, map[string]string{engine.SyncedConditionAnnotation: "true"}, parent)
	for range 3 {
		if _, err := c.SyncOnce(t.Context(), stored(cluster, ruleThings, "p")); err == nil {
			t.Fatal("SyncOnce of a failing hook succeeded")
		}
	}
	if id.Load() < 3 {
		t.Fatalf("%d hook calls, want one per sync", id.Load())
	}
	if n := countWrites(cluster, "patch things/status ns/p"); n != 1 {
		t.Errorf("status written %d times by three syncs failing with different texts, want 1", n)
	}
}

// TestForgedChildInAnotherNamespaceIsLeftAlone: a ConfigMap of another
// namespace that matches the parent's selector and has a controller
// reference to its UID is not its child: the hook is not given it, and
// the sync neither deletes, updates nor releases it. Twin of
// TestForgedChildInAnotherNamespace (scope_test.go).
func TestForgedChildInAnotherNamespaceIsLeftAlone(t *testing.T) {
	parent := syncParent()
	forged := syncChild("forged", "planted", parent)
	forged.SetNamespace("other")
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{answerChild("cm", "v")}} })
	c, cluster := syncCluster(t, h, nil, nil, nil, parent, forged)
	syncOK(t, c, cluster)
	for _, req := range h.Requests() {
		if observed, _ := req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any); observed["forged"] != nil {
			t.Errorf("the hook was given the forged ConfigMap as a child")
		}
	}
	if w := cluster.Writes(); slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "other/forged") }) {
		t.Errorf("writes %v touch the forged ConfigMap", w)
	}
}

// TestRelatedKeyedForTheHookThatGetsThem: related objects are keyed by
// the version of the hook given them: a v1 sync hook gets "name", a v2
// finalize hook of the same controller "namespace/name". Twin of
// TestRelatedKeyedForTheHookCalled (related_test.go).
func TestRelatedKeyedForTheHookThatGetsThem(t *testing.T) {
	finalizer := finalizerPrefix + "rules"
	parent := syncParent(finalizer)
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}} })
	customize := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"source"}}}}
	})
	c, cluster := syncCluster(t, h, nil, func(spec map[string]any) {
		withCustomize(customize)(spec)
		spec["hooks"].(map[string]any)["finalize"] = map[string]any{"version": "v2", "webhook": map[string]any{"url": h.URL + "/finalize", "timeout": "5s"}}
	}, nil, parent, inmemory.Object("v1", "ConfigMap", "ns", "source", nil, nil))
	syncOK(t, c, cluster)
	if _, err := cluster.Objects.Delete(t.Context(), ruleThings, "ns", "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	syncOK(t, c, cluster)
	keys := map[bool][]string{}
	for _, req := range h.Requests() {
		related, _ := req["related"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		keys[req["finalizing"] == true] = append(keys[req["finalizing"] == true], slices.Sorted(maps.Keys(related))...)
	}
	if got := slices.Compact(keys[false]); !slices.Equal(got, []string{"source"}) {
		t.Errorf("the v1 sync hook got related keys %q, want [source]", got)
	}
	if got := slices.Compact(keys[true]); !slices.Equal(got, []string{"ns/source"}) {
		t.Errorf("the v2 finalize hook got related keys %q, want [ns/source]", got)
	}
}

// TestEveryKindOfHookFailureWritesNothing: a hook that is down, answers
// invalid JSON, or answers a child whose labels are outside
// the parent's selector fails the sync, saying why, and nothing is
// written. Twin of TestFailuresChangeNothing (composite_test.go).
func TestEveryKindOfHookFailureWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		serve      http.HandlerFunc
		answer     func(map[string]any) any
		down       bool
	}{
		{name: "down", want: "connect", down: true},
		{name: "invalid JSON", want: "JSON", serve: func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = w.Write([]byte(`{"children": [`))
		}},
		{name: "labels outside the selector", want: "do not match the parent's selector", answer: func(map[string]any) any {
			child := answerChild("keep", "changed")
			child["metadata"].(map[string]any)["labels"] = map[string]any{"parent": "nope"}
			return map[string]any{"children": []any{child}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *ruletest.Hook
			switch {
			case tc.answer != nil:
				h = ruletest.NewHook(t, tc.answer)
			default:
				server := httptest.NewServer(tc.serve)
				h = &ruletest.Hook{URL: server.URL}
				if tc.down {
					server.Close()
				} else {
					t.Cleanup(server.Close)
				}
			}
			parent := syncParent()
			c, cluster := syncCluster(t, h, nil, nil, nil, parent, syncChild("keep", "old", parent))
			_, err := c.SyncOnce(t.Context(), parent)
			cluster.Refused(t, err, tc.want)
		})
	}
}

// TestSyncErrorEventNamesTheControllerOnce: the SyncError Event of a
// failing hook names the controller once, then the hook and its error.
// Twin of TestSyncErrorSaysWhenItRetries (fixedpoint_test.go; the retry's
// delay comes from the work queue, which SyncOnce has not).
func TestSyncErrorEventNamesTheControllerOnce(t *testing.T) {
	parent := syncParent()
	h := ruletest.NewHook(t, func(map[string]any) any { return ruletest.HTTPError(500) })
	c, cluster := syncCluster(t, h, nil, nil, nil, parent)
	if _, err := c.SyncOnce(t.Context(), parent); err == nil {
		t.Fatal("SyncOnce of a failing hook succeeded")
	}
	events := cluster.Events()
	want := "Warning " + engine.ReasonSyncError + " compositecontroller rules: sync hook " + h.URL + "/sync: HTTP 500"
	if len(events) != 1 || !strings.HasPrefix(events[0], want) || strings.Count(events[0], "compositecontroller") != 1 {
		t.Errorf("events %q, want one starting %q, naming the controller once", events, want)
	}
}
