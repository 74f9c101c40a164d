//go:build integration

package decorator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
)

// syncedCondition returns the metactl.io/Synced condition of obj; nil when
// it has none.
func syncedCondition(obj *unstructured.Unstructured) map[string]any {
	return controllertest.Condition(obj, engine.SyncedConditionType)
}

func optIn(obj *unstructured.Unstructured) {
	obj.SetAnnotations(map[string]string{engine.SyncedConditionAnnotation: "true"})
}

// TestDecoratedObjectShowsSynced: a decorated object of a controller that
// opts in is Synced=False HookFailed while the hook's answer cannot be
// decoded, with the attempt in the message, and Synced=True next to the
// hook's status once it answers.
func TestDecoratedObjectShowsSynced(t *testing.T) {
	name := testName(t)
	h := newHook(t, func(*request) any { return "not JSON" })
	start(t, []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}}, nil, syncHook(h), optIn)
	createClusterThing(t, name)
	obj := waitFor(t, clusterThingsGVR, "", name, "Synced=False HookFailed", func(o *unstructured.Unstructured) bool {
		c := syncedCondition(o)
		return c != nil && c["status"] == "False" && c["reason"] == engine.ReasonHookFailed
	})
	if msg, _ := syncedCondition(obj)["message"].(string); !strings.Contains(msg, "invalid response") || !strings.Contains(msg, "; attempt ") {
		t.Errorf("message %q lacks the error or the attempt", msg)
	}
	h.setAnswer(statusStepHook)
	waitFor(t, clusterThingsGVR, "", name, "Synced=True and status step two", func(o *unstructured.Unstructured) bool {
		c := syncedCondition(o)
		return c != nil && c["status"] == "True" && statusStep(o) == "two"
	})
}

// TestSyncedOnObjectsWithoutStatus: a decorated ConfigMap has no status of
// its own (the condition goes into its metactl.io/status annotation);
// the condition is written once, not on every sync.
func TestSyncedOnObjectsWithoutStatus(t *testing.T) {
	ns := env.CreateNamespace(t)
	name := testName(t)
	h := newHook(t, func(*request) any { return map[string]any{"labels": map[string]any{"seen": "yes"}} })
	// The metrics count per controller name, across runs of the test.
	writes0 := controllertest.Writes(name, "patch", "status")
	c := start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": ns}}}}, nil, syncHook(h), func(obj *unstructured.Unstructured) {
		optIn(obj)
		obj.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
	})
	createConfigMap(t, ns, "target", map[string]any{"decorate": ns}, nil)
	waitFor(t, configMapsGVR, ns, "target", "labelled", func(o *unstructured.Unstructured) bool { return o != nil && o.GetLabels()["seen"] == "yes" })
	syncs := controllertest.Syncs(c.Name(), "success")
	began := time.Now()
	testenv.Eventually(t, 20*time.Second, "three resync periods and as many syncs", func(context.Context) (bool, error) {
		return controllertest.Syncs(c.Name(), "success") >= syncs+3 && time.Since(began) > 3*time.Second, nil
	})
	if got := controllertest.Writes(c.Name(), "patch", "status") - writes0; got > 1 {
		t.Errorf("%v status writes to a ConfigMap, want at most 1", got)
	}
}

// TestSyncedConditionOfTwoControllers: two DecoratorControllers that both
// write the condition on the same object, one whose hook succeeds and one
// whose hook fails, do not take it from each other: the first writer owns
// it, its message names that controller, and the status is written a
// bounded number of times (no ping-pong) however often both sync.
func TestSyncedConditionOfTwoControllers(t *testing.T) {
	name := testName(t)
	resources := []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}}
	healthy := newHook(t, func(*request) any { return map[string]any{} })
	failing := newHook(t, func(*request) any { return "not JSON" })
	named := func(suffix string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) {
			obj.SetName(name + suffix)
			optIn(obj)
			obj.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
		}
	}
	writes := func() float64 {
		return controllertest.Writes(name+"-a", "patch", "status") + controllertest.Writes(name+"-b", "patch", "status")
	}
	writes0 := writes()
	a := start(t, resources, nil, syncHook(healthy), named("-a"))
	b := start(t, resources, nil, syncHook(failing), named("-b"))
	started := time.Now()
	createClusterThing(t, name)
	obj := waitFor(t, clusterThingsGVR, "", name, "a Synced condition", func(o *unstructured.Unstructured) bool { return syncedCondition(o) != nil })
	first, _ := syncedCondition(obj)["message"].(string)
	t.Logf("first condition: %v", syncedCondition(obj))
	if !strings.Contains(first, "decoratorcontroller "+a.Name()) && !strings.Contains(first, "decoratorcontroller "+b.Name()) {
		t.Errorf("message %q names neither controller", first)
	}
	calls := healthy.calls.Load() + failing.calls.Load()
	testenv.Eventually(t, 30*time.Second, "ten more syncs of the two", func(context.Context) (bool, error) {
		return healthy.calls.Load()+failing.calls.Load() >= calls+10 && healthy.calls.Load() >= 3, nil
	})
	bound := 2 + float64(time.Since(started)/engine.SyncedRewriteInterval)
	if got := writes() - writes0; got > bound {
		t.Errorf("%v status writes by the two controllers in %v, want at most %v: they take the condition from each other", got, time.Since(started).Round(time.Millisecond), bound)
	}
	now, err := env.Dynamic.Resource(clusterThingsGVR).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := syncedCondition(now)
	t.Logf("condition now: %v", c)
	owner := a.Name()
	if !strings.Contains(first, owner) {
		owner = b.Name()
	}
	if msg, _ := c["message"].(string); !strings.Contains(msg, "decoratorcontroller "+owner) {
		t.Errorf("message %q, was %q: the owner changed", msg, first)
	}
}
