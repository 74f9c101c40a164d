package decorator

import (
	"errors"
	"strings"
	"testing"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/ruletest"
)

// TestTooLargeAttachmentsFailTheSyncBeforeTheHook: an object whose
// attachments are more bytes than a sync may send fails its sync with a
// *RequestTooLargeError naming the attachments, before the hook is called
// and with nothing written; within the limit it syncs. Either way the
// budget holds nothing once the sync ends.
func TestTooLargeAttachmentsFailTheSyncBeforeTheHook(t *testing.T) {
	obj := decorated("target")
	a, b := attachment("a", obj), attachment("b", obj)
	for _, s := range [...]map[string]any{a.Object, b.Object} {
		s["stringData"] = map[string]any{"v": strings.Repeat("x", 40<<10)}
	}
	h := ruletest.NewHook(t, func(map[string]any) any {
		return map[string]any{"attachments": []any{answerSecret("a"), answerSecret("b")}}
	})
	cluster := ruletest.NewCluster(ruleServed(t), nil, obj, a, b)
	budget := engine.NewRequestBudget(1<<20, 0)
	cluster.Options.Requests, cluster.Options.MaxRequestBytes = budget, 64<<10
	c := startDecorator(t, cluster, "rules", h, nil)
	_, err := c.SyncOnce(t.Context(), obj)
	var tooLarge *engine.RequestTooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "attachments of secrets") {
		t.Fatalf("SyncOnce: %v, want a *engine.RequestTooLargeError counting the attachments of secrets", err)
	}
	cluster.Refused(t, err, "--max-hook-request-bytes")
	if n := len(h.Requests()); n != 0 {
		t.Errorf("the hook was called %d times with a request over the limit", n)
	}
	if got := budget.InFlight(); got != 0 {
		t.Errorf("the refused sync left %d bytes held", got)
	}

	cluster.Options.MaxRequestBytes = 1 << 20
	c = startDecorator(t, cluster, "rules", h, nil)
	if _, err := c.SyncOnce(t.Context(), obj); err != nil {
		t.Fatalf("SyncOnce within the limit: %v", err)
	}
	if got := budget.InFlight(); got != 0 {
		t.Errorf("the sync left %d bytes held", got)
	}
}
