//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
)

// createBigConfigMaps creates n orphan ConfigMaps <prefix>-<i> in ns,
// labelled parent=<parent>, each with size bytes of data.
func createBigConfigMaps(t *testing.T, ns, prefix, parent string, n, size int) {
	t.Helper()
	value := strings.Repeat("x", size)
	for i := range n {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i), "namespace": ns, "labels": map[string]any{"parent": parent}},
			"data":     map[string]any{"value": value}}}
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOversizedRequestIsRefusedWhileOthersConverge, on the real control
// plane, with the limits scaled down through Options (a sync may send 1
// MiB, the process's budget is 4 MiB) so that 12 ConfigMaps of 100 KiB
// stand for a namespace's 100 ConfigMaps of 1 MiB (the defaults refuse
// those: engine TestDefaultRequestLimitsAreSane):
//
//   - a parent whose selector comes to match 12 such orphans fails its
//     sync with a SyncError naming the limit and the flag, before its
//     hook is called with them: none is adopted, and its own child and
//     its status stay;
//   - the same controller's other parents, whose requests fit but whose
//     hook stalls, hold at most half the budget;
//   - meanwhile another controller, sharing the budget, whose parent's
//     request (four such orphans, adopted) is larger than the budget's
//     reserve for small requests, converges within 30 s.
//
// Without the per-sync limit the first parent's orphans are adopted and
// sent; without the controller's half, the stalled syncs take the budget
// and the second controller's sync waits and fails until the test gives
// up.
func TestOversizedRequestIsRefusedWhileOthersConverge(t *testing.T) {
	ns := env.CreateNamespace(t)
	budget := engine.NewRequestBudget(4<<20, 2*time.Second)
	const big = 100 << 10

	bad := newTestHook(t, nil)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the hook's server closes
	bad.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		if strings.HasPrefix(req.Parent.GetName(), "stall-") {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "stalled", http.StatusServiceUnavailable)
			return
		}
		_ = jsonEncode(w, map[string]any{
			"status":   map[string]any{"children": len(req.Children["ConfigMap.v1"])},
			"children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-own", map[string]any{"value": "v"})},
		})
	})
	badCC := compositeController(t, bad, thingsGVR, func(spec map[string]any) {
		spec["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["timeout"] = "60s"
	})
	startController(t, badCC, func(o *composite.Options) { o.Requests, o.MaxRequestBytes = budget, 1<<20 })

	// The parent, synced once with its own child and a status.
	newThing(t, thingsGVR, ns, "huge", nil)
	waitFor(t, configMapsGVR, ns, "huge-own", "the child of huge", exists)
	waitFor(t, thingsGVR, ns, "huge", "huge's status", func(o *unstructured.Unstructured) bool { return statusField(o, "children") != nil })

	// Its selector comes to match 12 orphans of 100 KiB (created first:
	// one at a time, each would be adopted as it came).
	createBigConfigMaps(t, ns, "huge-big", "pending", 12, big)
	setSpec(t, thingsGVR, ns, "huge", map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "pending"}}})
	waitForEvent(t, ns, "huge", "SyncError", "more than the limit of 1048576 bytes per sync (--max-hook-request-bytes)")
	for i := range 12 {
		cm, err := get(t, configMapsGVR, ns, fmt.Sprintf("huge-big-%d", i))
		if err != nil || len(cm.GetOwnerReferences()) != 0 {
			t.Errorf("orphan huge-big-%d: %v, owners %v: adopted (or gone) by a refused sync", i, err, cm.GetOwnerReferences())
		}
	}
	if cm, err := get(t, configMapsGVR, ns, "huge-own"); err != nil || len(cm.GetOwnerReferences()) == 0 {
		t.Errorf("the child of the refused parent, which its new selector no longer matches, is gone or released: %v", err)
	}
	if o, err := get(t, thingsGVR, ns, "huge"); err != nil || statusField(o, "children") == nil {
		t.Errorf("the status of the refused parent is gone: %v", err)
	}
	for _, req := range bad.requestsSnapshot() {
		if req.Parent.GetName() == "huge" && len(req.Children["ConfigMap.v1"]) > 1 {
			t.Errorf("the hook was sent %d children of huge", len(req.Children["ConfigMap.v1"]))
		}
	}

	// Five parents of 8 orphans each (about 820 KiB a request, within the
	// limit) whose hook stalls: they hold what the controller may.
	for i := range 5 {
		name := fmt.Sprintf("stall-%d", i)
		createBigConfigMaps(t, ns, name+"-big", name, 8, big)
		newThing(t, thingsGVR, ns, name, nil)
	}
	testenv.Eventually(t, 30*time.Second, "the stalled syncs hold half the budget", func(context.Context) (bool, error) {
		return budget.InFlight() >= 3<<19, nil
	})

	// Another controller, sharing the budget, converges.
	good := newTestHook(t, valueHook)
	goodCC := compositeController(t, good, plainThingsGVR, nil)
	goodCC.SetName(goodCC.GetName() + "-good")
	startController(t, goodCC, func(o *composite.Options) { o.Requests = budget })
	createBigConfigMaps(t, ns, "good-big", "good", 4, big)
	newThing(t, plainThingsGVR, ns, "good", nil)
	waitFor(t, configMapsGVR, ns, "good-cm", "the child of the other controller's parent", exists)
}
