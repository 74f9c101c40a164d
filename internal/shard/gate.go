package shard

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metactl/metactl/internal/metrics"
)

// Gate admits the work of the buckets active in it: the engine asks it
// whether to queue an object's key (Admits) and starts every sync
// through it (Begin). A Coordinator activates and deactivates its
// buckets; a Gate is safe for concurrent use.
//
// A Gate has one slot per bucket (Coordinator.Gate: a namespace's slot
// is its bucket) or a single slot for every namespace
// (Coordinator.WholeGate: the cluster bucket's).
type Gate struct {
	// slotOf returns the slot of a namespace.
	slotOf func(namespace string) int
	// syncs count the syncs begun per slot (metrics.ShardBucketSyncs).
	syncs []prometheus.Counter

	mu sync.Mutex
	// active holds, per slot, the current activation, or nil while the
	// slot is inactive.
	active []*activation
}

// activation is one period during which a slot is active, and the
// syncs begun in it. Its fields are guarded by the Gate's mu.
type activation struct {
	g *Gate
	// cancels cancel the contexts of the syncs in flight, by the number
	// Begin gave each.
	cancels map[uint64]context.CancelFunc
	next    uint64
	// idle is closed once the activation has ended and no sync is in
	// flight.
	idle   chan struct{}
	closed bool
	ended  bool
}

// newGate returns a Gate of slots slots, all inactive; label names a
// slot in metrics (its bucket).
func newGate(slots int, slotOf func(namespace string) int, label func(slot int) string) *Gate {
	g := &Gate{slotOf: slotOf, active: make([]*activation, slots), syncs: make([]prometheus.Counter, slots)}
	for i := range g.syncs {
		g.syncs[i] = metrics.ShardBucketSyncs.WithLabelValues(label(i))
	}
	return g
}

// Admits reports whether namespace's slot is active now: whether an
// event of an object of namespace should be queued.
func (g *Gate) Admits(namespace string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active[g.slotOf(namespace)] != nil
}

// Begin starts a sync of an object of namespace if its slot is active:
// it returns a context derived from ctx, cancelled (before the
// Coordinator goes on) when the slot's handover passes its grace period
// or when the Coordinator cannot renew the slot's Lease, and done, which the caller must call when the sync
// ends (more calls do nothing). Until done, the slot's handover waits
// for the sync (up to its grace period). If the slot is not active, ok is
// false, syncCtx is ctx and done does nothing: the sync must not run.
func (g *Gate) Begin(ctx context.Context, namespace string) (syncCtx context.Context, done func(), ok bool) {
	slot := g.slotOf(namespace)
	g.mu.Lock()
	a := g.active[slot]
	if a == nil {
		g.mu.Unlock()
		return ctx, func() {}, false
	}
	g.syncs[slot].Inc()
	syncCtx, cancel := context.WithCancel(ctx)
	id := a.next
	a.next++
	a.cancels[id] = cancel
	g.mu.Unlock()

	var once sync.Once
	return syncCtx, func() {
		once.Do(func() {
			cancel()
			g.mu.Lock()
			defer g.mu.Unlock()
			delete(a.cancels, id)
			a.closeIfIdle()
		})
	}, true
}

// cancel cancels the contexts of a's syncs in flight, before it returns.
// It is called once a has ended: no sync begins in it any more.
func (a *activation) cancel() {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	for _, cancel := range a.cancels {
		cancel()
	}
}

// closeIfIdle closes idle once the activation has ended and its last
// sync is done; g.mu must be held.
func (a *activation) closeIfIdle() {
	if a.ended && len(a.cancels) == 0 && !a.closed {
		close(a.idle)
		a.closed = true
	}
}

// activate makes slot active, if it was not.
func (g *Gate) activate(slot int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[slot] != nil {
		return
	}
	g.active[slot] = &activation{g: g, cancels: map[uint64]context.CancelFunc{}, idle: make(chan struct{})}
}

// deactivate makes slot inactive: Admits and Begin refuse its
// namespaces from now on. It returns the activation that ended, whose
// syncs may still be in flight (see drain), or nil if slot was not
// active.
func (g *Gate) deactivate(slot int) *activation {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.active[slot]
	if a == nil {
		return nil
	}
	g.active[slot] = nil
	a.ended = true
	a.closeIfIdle()
	return a
}
