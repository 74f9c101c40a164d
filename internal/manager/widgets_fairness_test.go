//go:build integration

package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
)

// fairnessBound is how much longer than alone a well-behaved
// controller's N parents may take to converge while a slow, a failing and
// a hot-looping controller run in the same process (docs/security.md,
// "Fairness between controllers"). Alone they converge in about a second
// on a loaded 2-core machine.
const fairnessBound = 15 * time.Second

// fairHook serves a controller's hook: answer gives the answer to a
// parent, or nil for a 500.
func fairHook(t *testing.T, answer func(r *http.Request, parent *unstructured.Unstructured) map[string]any) (*httptest.Server, *atomic.Int64) {
	calls := &atomic.Int64{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a := answer(r, req.Parent)
		if a == nil {
			http.Error(w, "this hook fails every call", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(s.Close)
	return s, calls
}

// child is a ConfigMap child of parent, named after it and tag.
func child(parent *unstructured.Unstructured, tag string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": parent.GetName() + "-" + tag}}
}

// TestFairnessBetweenControllers: in one process, a controller whose
// hook takes 3s, one whose hook fails every call, and one that hot-loops
// (it answers a status that changes on every call, resyncAfterSeconds
// 1e-9, and 20 Events of distinct reasons each time: an Event flood), and
// one that spins (a settled answer with resyncAfterSeconds 1e-9) each
// have 30 parents and run; then a well-behaved controller gets 10
// parents. Each of those gets its child, its status and the Event its
// hook asked for within fairnessBound, and the spinning hook is called at
// most once a second per parent meanwhile. (Seen failing with every
// controller recording through the manager's one Event pipeline, the
// Events of the well-behaved controller were not all there after 15s;
// with resyncDelay returning the delay asked, 1e-9, the spinning hook
// was called more than once a second per parent.)
//
// It installs the Widget CRD, which TestLifecycle (manager_test.go) must
// find absent first: hence this file's name, after it.
func TestFairnessBetweenControllers(t *testing.T) {
	applyWidgetsCRD(t)
	runManager(t, manager.Options{Config: env.Config})
	ns := env.CreateNamespace(t)
	const badParents, goodParents = 30, 10

	slow, slowCalls := fairHook(t, func(r *http.Request, parent *unstructured.Unstructured) map[string]any {
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		return map[string]any{"status": map[string]any{"ok": "slow"}, "children": []any{child(parent, "slow")}}
	})
	failing, failingCalls := fairHook(t, func(*http.Request, *unstructured.Unstructured) map[string]any { return nil })
	var n atomic.Int64
	flood := make([]any, 20)
	for i := range flood {
		flood[i] = map[string]any{"type": "Normal", "reason": fmt.Sprint("Flood", i), "message": "flood"}
	}
	hot, hotCalls := fairHook(t, func(*http.Request, *unstructured.Unstructured) map[string]any {
		return map[string]any{"status": map[string]any{"n": n.Add(1)}, "children": []any{}, "resyncAfterSeconds": 1e-9, "events": flood}
	})
	spin, spinCalls := fairHook(t, func(*http.Request, *unstructured.Unstructured) map[string]any {
		return map[string]any{"status": map[string]any{"ok": "spin"}, "children": []any{}, "resyncAfterSeconds": 1e-9}
	})
	good, _ := fairHook(t, func(_ *http.Request, parent *unstructured.Unstructured) map[string]any {
		return map[string]any{"status": map[string]any{"ok": "yes"}, "children": []any{child(parent, "good")},
			"events": []any{map[string]any{"type": "Normal", "reason": "GoodConverged", "message": "converged"}}}
	})

	for name, h := range map[string]*httptest.Server{"fair-slow": slow, "fair-failing": failing, "fair-hot": hot, "fair-spin": spin} {
		widgetController(t, name, h.URL)
		for i := range badParents {
			newWidget(t, ns, name, fmt.Sprint(name, "-", i))
		}
	}
	// The three are at work: every parent of each called its hook (the
	// hot one several times over).
	testenv.Eventually(t, 60*time.Second, "the other controllers at work", func(context.Context) (bool, error) {
		return slowCalls.Load() >= badParents && failingCalls.Load() >= badParents && hotCalls.Load() >= 5*badParents && spinCalls.Load() >= 2*badParents, nil
	})

	widgetController(t, "fair-good", good.URL)
	start, spinAtStart := time.Now(), spinCalls.Load()
	for i := range goodParents {
		newWidget(t, ns, "fair-good", fmt.Sprint("fair-good-", i))
	}
	converged := func(ctx context.Context) (bool, error) {
		for i := range goodParents {
			name := fmt.Sprint("fair-good-", i)
			w, err := env.Dynamic.Resource(widgetsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if ok, _, _ := unstructured.NestedString(w.Object, "status", "ok"); ok != "yes" {
				return false, nil
			}
			if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name+"-good", metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=GoodConverged"})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range events.Items {
			seen[e.InvolvedObject.Name] = true
		}
		return len(seen) == goodParents, nil
	}
	testenv.Eventually(t, fairnessBound, fmt.Sprintf("the well-behaved controller's %d parents converged, with their Events", goodParents), converged)
	// The spinning hook's parents were each synced at most once per
	// engine.DefaultMinResyncAfter (1s) meanwhile, one call each (its
	// answer is settled), and at most two calls more (a sync under way).
	took, spun := time.Since(start), spinCalls.Load()-spinAtStart
	if most := int64(badParents) * (int64(took/time.Second) + 2); spun > most {
		t.Errorf("the hook answering resyncAfterSeconds 1e-9 was called %d times in %v for %d parents, want at most %d (once a second each)", spun, took.Round(time.Millisecond), badParents, most)
	}
	t.Logf("the well-behaved controller's %d parents converged in %v; hooks called: hot %d times, spinning %d, failing %d, slow %d",
		goodParents, time.Since(start).Round(time.Millisecond), hotCalls.Load(), spinCalls.Load(), failingCalls.Load(), slowCalls.Load())
}
