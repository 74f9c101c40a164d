package composite

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/ruletest"
)

// TestTooLargeRequestFailsBeforeAdoption: a parent whose selector matches
// orphans that, with its own child, are more bytes than a sync may send
// (Options.MaxRequestBytes) fails its sync with a *RequestTooLargeError
// (a SyncError Event naming the limit and the flag) before the hook is
// called and before anything is adopted, deleted or written: its child
// and its status stay. The budget holds nothing once the sync ends, and
// a parent whose request fits syncs (and releases it too).
func TestTooLargeRequestFailsBeforeAdoption(t *testing.T) {
	parent := syncParent()
	objs := []*unstructured.Unstructured{parent, syncChild("keep", "k", parent)}
	for _, name := range []string{"big-1", "big-2", "big-3"} {
		objs = append(objs, syncChild(name, strings.Repeat("x", 40<<10), nil))
	}
	h := ruletest.NewHook(t, func(map[string]any) any { return map[string]any{"children": []any{}} })
	cluster := ruletest.NewCluster(ruleResources(t), []schema.GroupVersionResource{ruleThings}, objs...)
	budget := engine.NewRequestBudget(1<<20, 0)
	cluster.Options.MaxRequestBytes = 100 << 10
	cluster.Options.Requests = budget
	c := startSync(t, cluster, h, nil, nil, nil)

	_, err := c.SyncOnce(t.Context(), parent)
	var tooLarge *engine.RequestTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("SyncOnce: %v, want a *engine.RequestTooLargeError", err)
	}
	cluster.Refused(t, err, "more than the limit of 102400 bytes per sync (--max-hook-request-bytes)")
	if n := len(h.Requests()); n != 0 {
		t.Errorf("the hook was called %d times with a request over the limit", n)
	}
	if events := strings.Join(cluster.Events(), "\n"); !strings.Contains(events, "SyncError") || !strings.Contains(events, "--max-hook-request-bytes") {
		t.Errorf("Events %q: want a SyncError naming --max-hook-request-bytes", events)
	}
	if got := budget.InFlight(); got != 0 {
		t.Errorf("the refused sync left %d bytes held in the budget", got)
	}

	// Within the limit: the sync runs, and releases what it held.
	cluster.Options.MaxRequestBytes = 1 << 20
	c = startSync(t, cluster, h, nil, nil, nil)
	if _, err := c.SyncOnce(t.Context(), parent); err != nil {
		t.Fatalf("SyncOnce within the limit: %v", err)
	}
	if len(h.Requests()) == 0 {
		t.Error("the hook was not called within the limit")
	}
	if got := budget.InFlight(); got != 0 {
		t.Errorf("the sync left %d bytes held in the budget", got)
	}
}
