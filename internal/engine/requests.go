package engine

import (
	"context"
	"sync"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// What a sync's hook requests may carry, counted before anything is
// decoded or encoded (docs/security.md, section 4).
const (
	// DefaultMaxRequestBytes is the default of Options.MaxRequestBytes:
	// the most bytes of objects (children or attachments, adopted orphans
	// included, and related objects) one sync may send its hook, as
	// informer.Object.Size estimates their JSON. A ConfigMap or Secret
	// holds at most 1 MiB of data, so about sixteen of the largest.
	DefaultMaxRequestBytes int64 = 16 << 20
	// DefaultRequestBudgetBytes is the default of NewRequestBudget's
	// size: the most bytes of such objects the syncs of all controllers
	// hold at once, from their count until the sync ends.
	DefaultRequestBudgetBytes int64 = 32 << 20
	// DefaultRequestBudgetWait is the longest a sync waits for room in
	// the budget before it fails (and is retried with backoff).
	DefaultRequestBudgetWait = 10 * time.Second
	// smallRequest is the most a sync may hold and still use the
	// budget's reserve, the eighth that larger holds cannot take: the
	// syncs of controllers whose requests are small keep going while
	// others fill the rest with large ones.
	smallRequest int64 = 256 << 10
)

// RequestBudget bounds the bytes of objects that the syncs of all
// controllers of a process hold for their hook requests at once, counted
// before decoding (informer.Object.Size). One controller holds at most
// half of it, so that no controller can take it whole; holds above
// smallRequest together take at most seven eighths of it, so that small
// requests always find room. A sync that finds no room waits, as a wait
// of its work queue (other syncs run meanwhile), at most the budget's
// wait, then fails with a *RequestBudgetError. A waiter is served as soon
// as what it asks for is free, not in arrival order. Safe for concurrent
// use.
type RequestBudget struct {
	size, share, main int64
	wait              time.Duration

	mu    sync.Mutex
	used  int64            // held, all holds
	large int64            // held by holds above smallRequest
	by    map[string]int64 // held, by controller
	freed chan struct{}    // closed, and replaced, when bytes are released
}

// NewRequestBudget returns a budget of size bytes (0: DefaultRequestBudgetBytes)
// whose syncs wait for room at most wait (0: DefaultRequestBudgetWait).
func NewRequestBudget(size int64, wait time.Duration) *RequestBudget {
	if size <= 0 {
		size = DefaultRequestBudgetBytes
	}
	if wait <= 0 {
		wait = DefaultRequestBudgetWait
	}
	return &RequestBudget{size: size, share: size / 2, main: size - size/8, wait: wait,
		by: map[string]int64{}, freed: make(chan struct{})}
}

// Size returns the budget's size in bytes.
func (b *RequestBudget) Size() int64 { return b.size }

// Share returns the most one controller holds at once: half the budget.
func (b *RequestBudget) Share() int64 { return b.share }

// InFlight returns the bytes held now (metactl_hook_request_bytes_in_flight).
func (b *RequestBudget) InFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// fitsLocked reports whether h may hold n more bytes now.
func (b *RequestBudget) fitsLocked(h *requestHold, n int64) bool {
	after := h.held + n
	if b.used+n > b.size || b.by[h.controller]+n > b.share {
		return false
	}
	if after <= smallRequest {
		return true
	}
	// A hold that becomes large brings what it held into the large part.
	grow := n
	if h.held <= smallRequest {
		grow = after
	}
	return b.large+grow <= b.main
}

// takeLocked makes h hold n more bytes.
func (b *RequestBudget) takeLocked(h *requestHold, n int64) {
	after := h.held + n
	switch {
	case after <= smallRequest:
	case h.held <= smallRequest:
		b.large += after
	default:
		b.large += n
	}
	b.used += n
	b.by[h.controller] += n
	h.held = after
}

// releaseLocked gives back everything h holds.
func (b *RequestBudget) releaseLocked(h *requestHold) {
	if h.held == 0 {
		return
	}
	if h.held > smallRequest {
		b.large -= h.held
	}
	b.used -= h.held
	if b.by[h.controller] -= h.held; b.by[h.controller] == 0 {
		delete(b.by, h.controller)
	}
	h.held = 0
	close(b.freed)
	b.freed = make(chan struct{})
}

// requestHold is what one sync holds of the budget, and counts against
// its own limit. Its methods are called by the sync's goroutine only.
type requestHold struct {
	budget     *RequestBudget // nil: only the limit applies
	controller string
	limit      int64 // per sync; 0: none
	counted    int64 // bytes counted
	held       int64 // bytes held of budget
}

// add counts n more bytes, of what (the children, the related objects),
// against the sync's limit, then takes them from the budget, waiting (as
// a wait of w, nil: none to tell) at most the budget's wait.
func (h *requestHold) add(ctx context.Context, w loop.Waiter, what string, n int64) error {
	h.counted += n
	if h.limit > 0 && h.counted > h.limit {
		return &RequestTooLargeError{What: what, Bytes: h.counted, Limit: h.limit, Flag: "--max-hook-request-bytes"}
	}
	b := h.budget
	if b == nil || n == 0 {
		return nil
	}
	if h.held+n > b.share {
		// It would never fit: a controller holds at most half the budget.
		return &RequestTooLargeError{What: what, Bytes: h.counted, Limit: b.share, Flag: "half of --hook-request-budget-bytes"}
	}
	b.mu.Lock()
	if b.fitsLocked(h, n) {
		b.takeLocked(h, n)
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	var err error
	wait := func() { err = h.wait(ctx, n) }
	if w == nil {
		wait()
	} else {
		w.WhileWaiting(wait)
	}
	return err
}

// wait takes n bytes once they fit, or fails when the budget's wait or
// ctx ends first. A sync that holds part of the budget waits holding it:
// its decoded objects are in memory. Two such syncs cannot wait on each
// other for ever: the wait is bounded, and the failed one releases.
func (h *requestHold) wait(ctx context.Context, n int64) error {
	b := h.budget
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.fitsLocked(h, n) {
			b.takeLocked(h, n)
			b.mu.Unlock()
			return nil
		}
		freed, held := b.freed, b.by[h.controller]
		b.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return &RequestBudgetError{Bytes: n, Held: h.held, ControllerHeld: held, Budget: b.size, Share: b.share, Wait: b.wait}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// release gives back what the sync holds; the sync ends.
func (h *requestHold) release() {
	if h == nil || h.budget == nil {
		return
	}
	h.budget.mu.Lock()
	defer h.budget.mu.Unlock()
	h.budget.releaseLocked(h)
}

// newRequestHold returns the hold of one sync of the engine's controller.
func (e *Engine) newRequestHold() *requestHold {
	limit := e.opts.MaxRequestBytes
	if limit == 0 {
		limit = DefaultMaxRequestBytes
	}
	return &requestHold{budget: e.opts.Requests, controller: e.name, limit: limit}
}

// CountRequest counts objs, cached objects that the sync's hook requests
// will carry (what names them in errors: "children of configmaps"),
// before the caller decodes them: against the sync's limit
// (Options.MaxRequestBytes), then in the process's budget
// (Options.Requests), waiting for room as a wait of the sync. Over the
// limit it returns a *RequestTooLargeError, and a *RequestBudgetError when
// no room came in time: the caller must then decode and write nothing, and
// return the error. The bytes stay held until the sync ends. A Target
// made outside a sync counts nothing.
func (t *Target) CountRequest(ctx context.Context, what string, objs []*informer.Object) error {
	if t.request == nil {
		return nil
	}
	var n int64
	for _, o := range objs {
		n += o.Size()
	}
	var w loop.Waiter
	if t.queued != nil {
		w = t.queued
	}
	return t.request.add(ctx, w, what, n)
}

// countObject counts t's object itself, which every request carries, as
// the cache holds it (an object that is not there, as SyncOnce may sync,
// is not counted).
func (e *Engine) countObject(ctx context.Context, t *Target) error {
	inf := t.Resource.Informer
	if inf == nil || t.Resource.cache != nil {
		return nil
	}
	obj, ok := inf.GetMeta(t.Object.GetNamespace(), t.Object.GetName())
	if !ok {
		return nil
	}
	return t.CountRequest(ctx, t.Resource.Noun, []*informer.Object{obj})
}
