//go:build integration

package composite_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
)

// explainThing asks c about the Thing ns/name.
func explainThing(c *composite.Controller, ns, name string) *explain.Answer {
	a := &explain.Answer{Object: explain.Request{Group: thingsGVR.Group, Version: "v1", Resource: "things", Namespace: ns, Name: name}}
	c.Explain(a)
	return a
}

// TestExplain: a controller's Explain names itself as the parent's
// controller, lists the children in its cache, reads the state and the
// last syncs from the history Store the engine records into (Synced with
// the hook call for a healthy parent; Failing with the error, attempt and
// next attempt for a failing one), names the selector of a parent it does
// not select, and knows nothing of a resource it does not sync.
func TestExplain(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		if req.Parent.GetName() == "p2" {
			http.Error(w, "p2 is broken", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(valueHook(req))
	})
	store := history.NewStore(history.StoreOptions{})
	cc := compositeController(t, hook, thingsGVR, nil)
	c := startController(t, cc, func(o *composite.Options) { o.History = store })
	newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "hello"})
	newThing(t, thingsGVR, ns, "p2", map[string]any{"value": "x"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)

	var a *explain.Answer
	testenv.Eventually(t, 30*time.Second, "explain shows p1 synced, with its child p1-cm", func(context.Context) (bool, error) {
		a = explainThing(c, ns, "p1")
		return len(a.Controllers) == 1 && a.Controllers[0].State.Phase == explain.PhaseSynced &&
			slices.ContainsFunc(a.Controllers[0].Dependents, func(d explain.Dependent) bool {
				return d.Resource == "configmaps" && d.Namespace == ns && d.Name == "p1-cm" && d.State == explain.DependentPresent
			}), nil
	})
	got := a.Controllers[0]
	if got.Kind != "CompositeController" || got.Name != cc.GetName() || got.Role != explain.RoleParent || !a.Watched || !a.InCache {
		t.Errorf("explain: %+v, want the parent of CompositeController %s", a, cc.GetName())
	}
	if !slices.ContainsFunc(got.Syncs, func(s *history.Sync) bool {
		return slices.ContainsFunc(s.Calls, func(c history.Call) bool { return c.Hook == "sync" && c.Result == "200" })
	}) {
		t.Errorf("p1's syncs record no sync hook call answered 200: %+v", got.Syncs)
	}

	testenv.Eventually(t, 30*time.Second, "explain shows p2 failing, with its attempt and next attempt", func(context.Context) (bool, error) {
		cs := explainThing(c, ns, "p2").Controllers
		if len(cs) != 1 {
			return false, nil
		}
		s := cs[0].State
		return s.Phase == explain.PhaseFailing && strings.Contains(s.Error, "p2 is broken") && s.Attempt >= 2 && !s.NextAttempt.IsZero() &&
			len(cs[0].Syncs) > 0 && len(cs[0].Syncs[0].Calls) > 0 && cs[0].Syncs[0].Calls[0].Result == "500", nil
	})

	// A Thing without the controller's label: not selected, and why.
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metactl.io/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "other", "namespace": ns},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "other"}}},
	}}
	if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "explain says the controller does not select Thing other", func(context.Context) (bool, error) {
		a := explainThing(c, ns, "other")
		return len(a.Controllers) == 0 && len(a.NotSelected) == 1 && a.NotSelected[0].Name == cc.GetName() &&
			strings.Contains(a.NotSelected[0].Selector, "test="+testLabel(t)), nil
	})

	// Another resource: not watched.
	a = &explain.Answer{Object: explain.Request{Resource: "configmaps", Namespace: ns, Name: "p1-cm"}}
	c.Explain(a)
	if a.Watched || a.InCache || len(a.Controllers) != 0 {
		t.Errorf("explain of a child: %+v, want nothing", a)
	}
}

// TestExplainWithoutRecords: with no history Store, a failing parent
// still reads as Failing, with its error and count of failures, from the
// failing set and the work queue.
func TestExplainWithoutRecords(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		http.Error(w, "hook down", http.StatusInternalServerError)
	})
	c := startController(t, compositeController(t, hook, thingsGVR, nil))
	newThing(t, thingsGVR, ns, "p1", nil)
	testenv.Eventually(t, 30*time.Second, "explain shows p1 failing", func(context.Context) (bool, error) {
		cs := explainThing(c, ns, "p1").Controllers
		if len(cs) != 1 {
			return false, nil
		}
		s := cs[0].State
		return s.Phase == explain.PhaseFailing && strings.Contains(s.Error, "hook down") && s.Attempt >= 2 && len(cs[0].Syncs) == 0, nil
	})
}

// TestExplainRollingUpdate: in the middle of a rolling update, explain
// names the ControllerRevision of each rolling child, which one is the
// latest, and the parent's Updated condition.
func TestExplainRollingUpdate(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, rollingHook)
	c := startController(t, rollingController(t, hook, "RollingInPlace"))
	parentOnV1(t, ns)
	waitUpdated(t, ns, "p1", "True", "OnLatestRevision")
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"version": "v2"})
	waitUpdated(t, ns, "p1", "False", "RolloutWaiting")

	var got explain.Controller
	testenv.Eventually(t, 30*time.Second, "explain shows one child on the latest revision, two on the old one, and the rollout waiting", func(context.Context) (bool, error) {
		cs := explainThing(c, ns, "p1").Controllers
		if len(cs) != 1 {
			return false, nil
		}
		got = cs[0]
		revisions := map[string]int{}
		latest := 0
		for _, d := range got.Dependents {
			if d.Resource != "childthings.test.metactl.io" || d.Revision == "" {
				return false, nil
			}
			revisions[d.Revision]++
			if d.Latest {
				latest++
			}
		}
		return len(got.Dependents) == 3 && len(revisions) == 2 && latest == 1 &&
			got.Rollout != nil && got.Rollout.Status == "False" && got.Rollout.Reason == composite.ReasonRolloutWaiting, nil
	})
}
