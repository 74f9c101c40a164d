package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

const mib = 1 << 20

// TestRequestLimitPerSync: the bytes a sync counts add up across calls
// (children, then related objects), and the count that goes over the
// sync's limit fails with a *RequestTooLargeError that says what was
// being counted, the bytes, the limit and the flag.
func TestRequestLimitPerSync(t *testing.T) {
	h := &requestHold{limit: 1000}
	if err := h.add(t.Context(), nil, "children of configmaps", 600); err != nil {
		t.Fatalf("600 of 1000: %v", err)
	}
	err := h.add(t.Context(), nil, "related objects", 600)
	var tooLarge *RequestTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Bytes != 1200 || tooLarge.Limit != 1000 {
		t.Fatalf("1200 of 1000: %v, want a *RequestTooLargeError of 1200 bytes over 1000", err)
	}
	for _, want := range []string{"1200 bytes", "related objects", "limit of 1000 bytes per sync", "--max-hook-request-bytes", "nothing was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if got := syncReason(err); got != ReasonRequestTooLarge {
		t.Errorf("the Synced condition's reason is %q, want %q", got, ReasonRequestTooLarge)
	}
}

// TestRequestBudgetOneControllerTakesAtMostHalf: a controller whose syncs
// hold half the budget waits for more (and fails once the wait is over),
// while another controller's sync gets room at once.
func TestRequestBudgetOneControllerTakesAtMostHalf(t *testing.T) {
	b := NewRequestBudget(8*mib, 50*time.Millisecond)
	a1 := &requestHold{budget: b, controller: "a"}
	a2 := &requestHold{budget: b, controller: "a"}
	other := &requestHold{budget: b, controller: "b"}
	if err := a1.add(t.Context(), nil, "children", 4*mib); err != nil {
		t.Fatalf("a: half the budget: %v", err)
	}
	err := a2.add(t.Context(), nil, "children", 1*mib)
	var noRoom *RequestBudgetError
	if !errors.As(err, &noRoom) || noRoom.ControllerHeld != 4*mib {
		t.Fatalf("a: more than half the budget: %v, want a *RequestBudgetError saying the controller holds 4 MiB", err)
	}
	if !strings.Contains(err.Error(), "--hook-request-budget-bytes") || syncReason(err) != ReasonRequestBudget {
		t.Errorf("error %q (reason %q) does not name the flag or reason %q", err, syncReason(err), ReasonRequestBudget)
	}
	if err := other.add(t.Context(), nil, "children", 3*mib); err != nil {
		t.Errorf("b, while a holds half the budget: %v", err)
	}
	if got := b.InFlight(); got != 7*mib {
		t.Errorf("in flight %d, want %d", got, 7*mib)
	}
	a1.release()
	other.release()
	a2.release()
	if got := b.InFlight(); got != 0 {
		t.Errorf("in flight %d after every hold was released", got)
	}
}

// TestRequestBudgetKeepsRoomForSmallRequests: holds above smallRequest
// take at most seven eighths of the budget, so a small request finds room
// while a large one of a third controller waits.
func TestRequestBudgetKeepsRoomForSmallRequests(t *testing.T) {
	b := NewRequestBudget(8*mib, 50*time.Millisecond)
	for _, c := range []string{"a", "b"} {
		if err := (&requestHold{budget: b, controller: c}).add(t.Context(), nil, "children", 3*mib+mib/2); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	var noRoom *RequestBudgetError
	if err := (&requestHold{budget: b, controller: "c"}).add(t.Context(), nil, "children", 300<<10); !errors.As(err, &noRoom) {
		t.Errorf("a large request with seven eighths taken: %v, want a *RequestBudgetError", err)
	}
	if err := (&requestHold{budget: b, controller: "c"}).add(t.Context(), nil, "children", 100<<10); err != nil {
		t.Errorf("a small request with seven eighths taken: %v", err)
	}
	// A hold that grows past smallRequest moves into the large part.
	grown := &requestHold{budget: b, controller: "d"}
	if err := grown.add(t.Context(), nil, "children", 200<<10); err != nil {
		t.Fatalf("small: %v", err)
	}
	if err := grown.add(t.Context(), nil, "related objects", 100<<10); !errors.As(err, &noRoom) {
		t.Errorf("a small hold growing large with seven eighths taken: %v, want a *RequestBudgetError", err)
	}
}

// TestRequestBudgetWaiterServedOnRelease: a sync that waits for room gets
// it as soon as another releases, and its wait ends with its context.
func TestRequestBudgetWaiterServedOnRelease(t *testing.T) {
	b := NewRequestBudget(8*mib, time.Hour)
	holder := &requestHold{budget: b, controller: "a"}
	if err := holder.add(t.Context(), nil, "children", 4*mib); err != nil {
		t.Fatal(err)
	}
	waiter := &requestHold{budget: b, controller: "a"}
	done := make(chan error, 1)
	go func() { done <- waiter.add(t.Context(), nil, "children", 1*mib) }()
	holder.release()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after the release: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter was not served within a minute of the release")
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- (&requestHold{budget: b, controller: "a"}).add(ctx, nil, "children", 4*mib) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled wait: %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a cancelled wait did not end within a minute")
	}
}

// TestRequestOverHalfTheBudgetNeverWaits: a sync that would hold more
// than one controller may fails at once, as too large, naming the budget.
func TestRequestOverHalfTheBudgetNeverWaits(t *testing.T) {
	b := NewRequestBudget(8*mib, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := (&requestHold{budget: b, controller: "a", limit: 16 * mib}).add(ctx, nil, "children", 5*mib)
	var tooLarge *RequestTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Limit != 4*mib || !strings.Contains(err.Error(), "half of --hook-request-budget-bytes") {
		t.Errorf("5 MiB with a share of 4 MiB: %v, want a *RequestTooLargeError at 4 MiB", err)
	}
}

// configMapObject is a cached ConfigMap of ns/name whose data holds size
// bytes.
func configMapObject(t *testing.T, name string, size int) *informer.Object {
	t.Helper()
	cm := inmemory.Object("v1", "ConfigMap", "ns", name, map[string]string{"app": "big"}, nil)
	cm.Object["data"] = map[string]any{"v": strings.Repeat("x", size)}
	data, err := json.Marshal(cm.Object)
	if err != nil {
		t.Fatal(err)
	}
	o, err := informer.NewObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDefaultRequestLimitsAreSane: with the defaults, the request of a
// parent with 100 ConfigMaps of 1 MiB (what a namespace's user can make)
// is refused, one with 10 is not, and every request the per-sync limit
// lets through fits in one controller's half of the budget.
func TestDefaultRequestLimitsAreSane(t *testing.T) {
	big := configMapObject(t, "big", 1*mib-1024)
	objs := make([]*informer.Object, 100)
	for i := range objs {
		objs[i] = big
	}
	b := NewRequestBudget(0, 0)
	h := &requestHold{budget: b, controller: "a", limit: DefaultMaxRequestBytes}
	if err := (&Target{request: h}).CountRequest(t.Context(), "children of configmaps", objs[:10]); err != nil {
		t.Errorf("10 ConfigMaps of 1 MiB with the defaults: %v", err)
	}
	h.release()
	h = &requestHold{budget: b, controller: "a", limit: DefaultMaxRequestBytes}
	var tooLarge *RequestTooLargeError
	if err := (&Target{request: h}).CountRequest(t.Context(), "children of configmaps", objs); !errors.As(err, &tooLarge) || tooLarge.Flag != "--max-hook-request-bytes" {
		t.Errorf("100 ConfigMaps of 1 MiB with the defaults: %v, want a *RequestTooLargeError of --max-hook-request-bytes", err)
	}
	if b.Share() < DefaultMaxRequestBytes {
		t.Errorf("one controller's share of the default budget (%d) is less than the default per-sync limit (%d)", b.Share(), DefaultMaxRequestBytes)
	}
}

// TestWatchesCapDistinctResources: a controller watches at most its
// limit of distinct resources; the same resource twice counts once.
func TestWatchesCapDistinctResources(t *testing.T) {
	gvr := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: r}
	}
	w := newWatches(inmemory.Informers(nil), false, 2)
	defer w.Release()
	for _, r := range []string{"configmaps", "secrets", "configmaps"} {
		if _, err := w.Watch(gvr(r), nil); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
	}
	_, err := w.Watch(gvr("services"), nil)
	if err == nil || !strings.Contains(err.Error(), "--max-controller-resources") || !strings.Contains(err.Error(), "services") {
		t.Errorf("a third distinct resource with a limit of 2: %v, want an error naming it and --max-controller-resources", err)
	}
	if w.Distinct() != 2 || len(w.held) != 3 {
		t.Errorf("%d distinct resources and %d informers held, want 2 and 3 (the refused one not acquired)", w.Distinct(), len(w.held))
	}
}
