package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
)

// Gate says which objects this replica works on, when parents are sharded
// over replicas (docs/scaling.md, "Handover without double
// reconciliation"); *shard.Gate is one. A nil Gate: every object.
//
// The namespace asked about is the synced object's (Key.Namespace): ""
// for a cluster-scoped parent or decorated object, whose controller the
// Gate admits whole or not at all (the cluster bucket).
type Gate interface {
	// Admits reports whether a key of an object of namespace may be
	// queued now.
	Admits(namespace string) bool
	// Begin is called before a sync of an object of namespace. ok false:
	// this replica does not work on it now; the sync does nothing (no
	// hook call, no write, no error, no record of a failed sync; the key
	// is dropped, not retried). Else the sync runs with syncCtx
	// (cancelled when the bucket is given up; made from ctx, so that the
	// Engine's Stop cancels it too) and calls done once when it ends.
	Begin(ctx context.Context, namespace string) (syncCtx context.Context, done func(), ok bool)
}

// gatedQueue is the work queue as the Engine's paths that queue a key use
// it (Engine.queue) when the Engine has a Gate: a key whose namespace the
// Gate does not admit now is dropped. Every key the Engine queues passes
// here (the handlers, Enqueue, EnqueueAdmitted, the resync period, the
// echoes held during a sync, resyncAfterSeconds, the related objects'
// changes), but for the requeues the loop makes itself: a successful
// sync's requeueAfter, which gated drops likewise, and the retries of a
// failed one, which Gate.Begin stops when they come due.
type gatedQueue struct {
	queue
	gate Gate
}

func (q gatedQueue) AddFor(key Key, t trigger.Trigger) {
	if q.gate.Admits(key.Namespace) {
		q.queue.AddFor(key, t)
	}
}

func (q gatedQueue) AddAfterFor(key Key, delay time.Duration, t trigger.Trigger) {
	if q.gate.Admits(key.Namespace) {
		q.queue.AddAfterFor(key, delay, t)
	}
}

// gated returns sync behind the Engine's Gate (sync itself without one):
// a sync the Gate does not Begin returns loop.ErrSkipped at once, having
// done nothing (no record, no Event, no count in Failing: sync is not
// called); otherwise sync runs with the Gate's context. A sync whose
// context the Gate cancelled (its bucket given up) while the loop's was
// not is not followed by another: its error is wrapped in loop.ErrSkipped
// (not retried), and its requeueAfter dropped. A requeueAfter is dropped
// too when the Gate no longer admits the key's namespace. sync sees the
// cancellation as a cancelled sync (see Failing.track, recordSyncError):
// it writes nothing after it, records no SyncError and counts no failure.
func (e *Engine) gated(sync loop.SyncFunc[Key]) loop.SyncFunc[Key] {
	gate := e.opts.Gate
	if gate == nil {
		return sync
	}
	return func(ctx context.Context, s *loop.Sync[Key]) (time.Duration, error) {
		syncCtx, done, ok := gate.Begin(ctx, s.Key.Namespace)
		if !ok {
			return 0, loop.ErrSkipped
		}
		defer done()
		after, err := sync(syncCtx, s)
		if syncCtx.Err() != nil && ctx.Err() == nil {
			// The bucket was given up: no sync after this one.
			if err == nil {
				return 0, nil
			}
			return 0, fmt.Errorf("%w: %w", loop.ErrSkipped, err)
		}
		if after > 0 && !gate.Admits(s.Key.Namespace) {
			// The sync the hook asks for later (resyncAfterSeconds),
			// which the loop queues itself: dropped as gatedQueue
			// drops the Engine's adds.
			after = 0
		}
		return after, err
	}
}

// ForgetNotAdmitted forgets what the Engine keeps of each object whose
// namespace the Gate no longer admits, which raises no delete event when
// its bucket is given up: its failure (Failing: neither failing nor
// succeeded here now), its unsettled hook's report, its Synced
// condition's bookkeeping, and its customize hook's answer and related
// objects' rules (the informers only those used are released). The
// record of its syncs (Options.History) is kept, within that Store's
// budget, and so are the echoes expected of its writes, which a later
// event of it never matches. The manager calls it once a bucket is given
// up (its syncs ended); without a Gate it does nothing.
func (e *Engine) ForgetNotAdmitted() {
	gate := e.opts.Gate
	if gate == nil {
		return
	}
	notAdmitted := func(key Key) bool { return !gate.Admits(key.Namespace) }
	e.failing.forgetIf(notAdmitted)
	e.unsettled.forgetIf(notAdmitted)
	e.synced.forgetIf(notAdmitted)
	e.blockers.forgetIf(notAdmitted)
	if e.related != nil {
		e.related.ForgetIf(notAdmitted)
	}
}

// ParentNamespaces calls f with the namespace ("" when cluster-scoped)
// of every cached object the controller syncs, admitted or not: the
// parents per bucket of the metrics (metactl_shard_bucket_parents).
func (e *Engine) ParentNamespaces(f func(namespace string)) {
	if e.queue == nil { // not started: no cache yet
		return
	}
	for _, key := range e.controller.Keys() {
		f(key.Namespace)
	}
}

// EnqueueAdmitted queues, for t, every object in the cache
// (Controller.Keys) whose namespace the Gate admits now; every object
// without a Gate. The manager calls it when buckets become active
// (trigger.CauseHandover), so that the parents of a bucket taken over are
// synced although their cached objects raise no event. Call it once Start
// has returned; before StartCaches it does nothing.
func (e *Engine) EnqueueAdmitted(t trigger.Trigger) {
	if e.queue == nil {
		return
	}
	for _, key := range e.controller.Keys() {
		e.queue.AddFor(key, t)
	}
}
