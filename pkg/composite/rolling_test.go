//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// rollingHook answers a parent with spec.replicas children (childthings
// <parent>-<i>) carrying the parent's spec.version.
func rollingHook(req *syncRequest) any {
	replicas, _, _ := unstructured.NestedInt64(req.Parent.Object, "spec", "replicas")
	version, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version")
	var children []any
	for i := range replicas {
		children = append(children, map[string]any{
			"apiVersion": "test.metactl.io/v1", "kind": "ChildThing",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", req.Parent.GetName(), i), "labels": map[string]any{"parent": req.Parent.GetName()}},
			"spec":     map[string]any{"version": version},
		})
	}
	return map[string]any{"children": children, "status": map[string]any{"version": version}}
}

func rollingController(t *testing.T, h *testHook, method string) *unstructured.Unstructured {
	return compositeController(t, h, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "childthings",
			"updateStrategy": map[string]any{"method": method, "statusChecks": map[string]any{
				"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}}}
	})
}

// versions returns each child's spec.version and UID, by name.
func versions(t *testing.T, ns string) (map[string]string, map[string]types.UID) {
	t.Helper()
	list, err := env.Dynamic.Resource(childThingsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, uids := map[string]string{}, map[string]types.UID{}
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() != nil {
			continue
		}
		s, _, _ := unstructured.NestedString(item.Object, "spec", "version")
		v[item.GetName()] = s
		uids[item.GetName()] = item.GetUID()
	}
	return v, uids
}

func countVersion(v map[string]string, want string) int {
	n := 0
	for _, got := range v {
		if got == want {
			n++
		}
	}
	return n
}

// markReady sets the Ready condition of every child on version, and its
// status.observedGeneration to its generation, as a real controller would.
func markReady(t *testing.T, ns, version string) {
	t.Helper()
	v, _ := versions(t, ns)
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if v[name] != version {
			continue
		}
		obj, err := env.Dynamic.Resource(childThingsGVR).Namespace(ns).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		patch := []byte(fmt.Sprintf(`{"status":{"observedGeneration":%d,"conditions":[{"type":"Ready","status":"True"}]}}`, obj.GetGeneration()))
		if _, err := env.Dynamic.Resource(childThingsGVR).Namespace(ns).Patch(ctx(t), name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
}

func updatedCondition(o *unstructured.Unstructured) map[string]any {
	return controllertest.Condition(o, "Updated")
}

func waitUpdated(t *testing.T, ns, name, status, reason string) map[string]any {
	t.Helper()
	var cond map[string]any
	waitFor(t, thingsGVR, ns, name, "Updated="+status+" "+reason, func(o *unstructured.Unstructured) bool {
		cond = updatedCondition(o)
		og, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		return cond != nil && cond["status"] == status && cond["reason"] == reason && og == o.GetGeneration()
	})
	return cond
}

func revisionCount(t *testing.T, ns string) int {
	list, err := env.Dynamic.Resource(v1alpha1.ControllerRevisionResource).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// rollOut drives a rollout to version from step first (that many children
// on it, not yet ready) by marking each moved child ready, checking that
// exactly one more child is on the new version each step.
func rollOut(t *testing.T, ns, version string, first, replicas int) {
	t.Helper()
	for step := first; step <= replicas; step++ {
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("step %d: %d children on %s", step, step, version), func(context.Context) (bool, error) {
			v, _ := versions(t, ns)
			return countVersion(v, version) == step && len(v) == replicas, nil
		})
		v, _ := versions(t, ns)
		if n := countVersion(v, version); n != step {
			t.Fatalf("step %d: %d children on %s, want exactly %d (one at a time)", step, n, version, step)
		}
		markReady(t, ns, version)
	}
}

// rolledOutOnV1 starts a controller with rolling child resources (method)
// and a parent p1 of 3 children on version v1, and waits until they are all
// there and ready.
func rolledOutOnV1(t *testing.T, method string) (ns string, hook *testHook) {
	t.Helper()
	ns = env.CreateNamespace(t)
	hook = newTestHook(t, rollingHook)
	startController(t, rollingController(t, hook, method))
	parentOnV1(t, ns)
	return ns, hook
}

// parentOnV1 creates a parent p1 of 3 children on version v1 in ns, for a
// running rolling controller, and waits until they are all there and
// ready.
func parentOnV1(t *testing.T, ns string) {
	t.Helper()
	newThing(t, thingsGVR, ns, "p1", map[string]any{"replicas": int64(3), "version": "v1"})
	testenv.Eventually(t, 30*time.Second, "3 children on v1", func(context.Context) (bool, error) {
		v, _ := versions(t, ns)
		return countVersion(v, "v1") == 3, nil
	})
	markReady(t, ns, "v1")
}

func TestRollingRecreateOneChildAtATime(t *testing.T) {
	ns, hook := rolledOutOnV1(t, "RollingRecreate")
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")
	_, before := versions(t, ns)

	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	// The first moved child is new and not ready: the rollout waits.
	cond := waitUpdated(t, ns, "p1", "False", "RolloutWaiting")
	t.Logf("stalled: %s", cond["message"])
	calls := hook.calls.Load()
	testenv.Eventually(t, 30*time.Second, "two more syncs while stalled", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
	v, _ := versions(t, ns)
	if n := countVersion(v, "v2"); n != 1 {
		t.Fatalf("a stalled rollout moved on: %d children on v2, want 1 (%v)", n, v)
	}
	rollOut(t, ns, "v2", 1, 3)
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")

	_, after := versions(t, ns)
	for name, uid := range after {
		if before[name] == uid {
			t.Errorf("RollingRecreate kept %s's UID", name)
		}
	}
	testenv.Eventually(t, 30*time.Second, "old revisions pruned", func(context.Context) (bool, error) { return revisionCount(t, ns) == 1, nil })
}

func TestRollingInPlaceKeepsUIDsAndHandlesANewRevisionMidway(t *testing.T) {
	ns, _ := rolledOutOnV1(t, "RollingInPlace")
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")
	_, before := versions(t, ns)

	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	testenv.Eventually(t, 30*time.Second, "one child on v2", func(context.Context) (bool, error) {
		v, _ := versions(t, ns)
		return countVersion(v, "v2") == 1, nil
	})
	markReady(t, ns, "v2")
	// A new revision in mid-rollout: children on v1 and v2 both move to v3.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v3"})
	rollOut(t, ns, "v3", 1, 3)
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")
	_, after := versions(t, ns)
	for name, uid := range after {
		if before[name] != uid {
			t.Errorf("RollingInPlace replaced %s", name)
		}
	}
	testenv.Eventually(t, 30*time.Second, "old revisions pruned", func(context.Context) (bool, error) { return revisionCount(t, ns) == 1, nil })
	p, _ := get(t, thingsGVR, ns, "p1")
	if statusField(p, "version") != "v3" {
		t.Errorf("the hook's status was clobbered: %v", p.Object["status"])
	}
}

// TestRollingHookFailureForOneRevisionChangesNothing fails the hook only
// for the old revision mid-rollout: no child moves, the parent gets a
// SyncError, and the rollout resumes once the hook answers again.
func TestRollingHookFailureForOneRevisionChangesNothing(t *testing.T) {
	ns, hook := rolledOutOnV1(t, "RollingRecreate")
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	waitUpdated(t, ns, "p1", "False", "RolloutWaiting")

	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		if v, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version"); v == "v1" {
			http.Error(w, "old revision broken", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = jsonEncode(w, rollingHook(req))
	})
	markReady(t, ns, "v2") // would let the next child move
	waitForEvent(t, ns, "p1", "SyncError", "old revision broken")
	calls := hook.calls.Load()
	testenv.Eventually(t, 30*time.Second, "retries", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
	if v, _ := versions(t, ns); countVersion(v, "v2") != 1 {
		t.Fatalf("children moved although the hook failed for a revision: %v", v)
	}
	hook.answer(rollingHook)
	testenv.Eventually(t, 30*time.Second, "the rollout resumes", func(context.Context) (bool, error) {
		v, _ := versions(t, ns)
		return countVersion(v, "v2") == 2, nil
	})
}

// TestRollingFinalizeCallsEachRevision: while a parent with rolling
// children is finalized, the finalize hook is called once per revision, as
// metacontroller does while the parent has its finalizer (its catset
// example scales down in rollout order from there): children not yet moved
// keep their revision's answer, so a deletion in mid-rollout does not
// recreate them with the latest template.
func TestRollingFinalizeCallsEachRevision(t *testing.T) {
	ns := env.CreateNamespace(t)
	var done atomic.Bool
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := rollingHook(req).(map[string]any)
		if req.Finalizing {
			if done.Load() {
				return map[string]any{"children": []any{}, "finalized": true}
			}
			answer["finalized"] = false
		}
		return answer
	})
	cc := rollingController(t, hook, "RollingRecreate")
	cc.Object["spec"].(map[string]any)["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": hook.server.URL + "/sync"}}
	startController(t, cc)
	parentOnV1(t, ns)
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")

	// One child moves to v2 and is not ready: the rollout waits there.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	waitUpdated(t, ns, "p1", "False", "RolloutWaiting")
	_, before := versions(t, ns)
	t.Cleanup(func() { done.Store(true) })
	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "finalize calls for both revisions", func(context.Context) (bool, error) {
		seen := map[string]bool{}
		for _, req := range hook.requestsSnapshot() {
			if req.Finalizing {
				version, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version")
				seen[version] = true
			}
		}
		return seen["v1"] && seen["v2"], nil
	})
	// A sync that starts after those calls' writes: they are done.
	poke(t, hook, thingsGVR, ns, "p1", "1")
	v, after := versions(t, ns)
	if countVersion(v, "v1") != 2 || countVersion(v, "v2") != 1 {
		t.Errorf("children while finalizing: %v, want 2 on v1 and 1 on v2, as before the deletion", v)
	}
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("finalizing replaced %s", name)
		}
	}

	done.Store(true)
	// Poke the parent: the finalize hook is now done.
	waitFor(t, thingsGVR, ns, "p1", "gone once finalized", func(o *unstructured.Unstructured) bool {
		if o != nil {
			_, _ = env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(context.Background(), "p1", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"poke":"`+time.Now().String()+`"}}}`), metav1.PatchOptions{})
		}
		return o == nil
	})
}

// TestRollingFinalizeWaitsForEveryRevision: in mid-rollout, a finalize
// hook that answers finalized for the latest revision but not for an older
// one leaves the finalizer on the parent, as metacontroller does (it
// removes it only when every revision's answer agrees); once every
// revision answers finalized, the parent goes.
func TestRollingFinalizeWaitsForEveryRevision(t *testing.T) {
	ns := env.CreateNamespace(t)
	var done atomic.Bool
	hook := newTestHook(t, func(req *syncRequest) any {
		answer := rollingHook(req).(map[string]any)
		if req.Finalizing {
			version, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version")
			answer["finalized"] = version == "v2" || done.Load()
		}
		return answer
	})
	cc := rollingController(t, hook, "RollingRecreate")
	cc.Object["spec"].(map[string]any)["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": hook.server.URL + "/sync"}}
	startController(t, cc)
	parentOnV1(t, ns)
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")

	// One child moves to v2 and is not ready: the rollout waits there.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	waitUpdated(t, ns, "p1", "False", "RolloutWaiting")
	t.Cleanup(func() { done.Store(true) })
	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "finalize calls for both revisions", func(context.Context) (bool, error) {
		seen := map[string]bool{}
		for _, req := range hook.requestsSnapshot() {
			if req.Finalizing {
				version, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "version")
				seen[version] = true
			}
		}
		return seen["v1"] && seen["v2"], nil
	})
	// Two syncs that start after those calls (the first is done once the
	// hook is given the second's label): v2 said finalized, v1 did not.
	poke(t, hook, thingsGVR, ns, "p1", "1")
	poke(t, hook, thingsGVR, ns, "p1", "2")
	p, err := get(t, thingsGVR, ns, "p1")
	if err != nil || p == nil {
		t.Fatalf("the parent went while an older revision's answer was not finalized: %v", err)
	}
	if len(p.GetFinalizers()) == 0 {
		t.Errorf("finalizers removed while an older revision's answer was not finalized")
	}

	done.Store(true)
	waitFor(t, thingsGVR, ns, "p1", "gone once every revision is finalized", func(o *unstructured.Unstructured) bool {
		if o != nil {
			_, _ = env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(context.Background(), "p1", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"poke":"`+time.Now().String()+`"}}}`), metav1.PatchOptions{})
		}
		return o == nil
	})
}
