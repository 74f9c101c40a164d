package informer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/shard"
)

// Hold makes the Factory keep, from now on, only the objects of set in
// the informers of namespaced resources (Options.Namespaced); informers
// of cluster-scoped resources, and whole ones (AcquireWhole), keep every
// object. Each running informer lists again, with set's shardSelector,
// into a new store; the old store serves reads until the new one has
// synced, then the new one replaces it. The handlers added through
// Informer.AddEventHandler then receive only what changed between the
// two:
//
//   - nothing for an object the old store held with the same
//     resourceVersion, nor for an object of a bucket given up (it was
//     not deleted);
//   - an add for an object new to the cache, with isInInitialList true
//     when its bucket was not held before (the initial objects of a
//     bucket taken), false otherwise (an object created meanwhile);
//   - an update for an object whose resourceVersion changed;
//   - a delete (a cache.DeletedFinalStateUnknown) for an object of a
//     bucket still held that is gone.
//
// A handler whose events of the old store were not all delivered when ctx
// ended receives instead the new store's initial adds, as a new handler
// would.
//
// Hold returns once every running informer has synced with set, or with
// ctx's error when it ends first (the informers not yet swapped keep the
// previous set until the next Hold). Informers acquired later start with
// set. Holds run one at a time per informer, and of overlapping Holds
// the last one's set wins; set must be of an install
// (shard.NewSet), possibly empty: an informer then holds no namespaced
// object and sends no request.
func (f *Factory) Hold(ctx context.Context, set shard.Set) error {
	if f.opts.Namespaced == nil {
		return errors.New("informer: Hold needs Options.Namespaced")
	}
	if set.Buckets < 1 {
		return errors.New("informer: Hold of a set of no install (use shard.NewSet)")
	}
	f.mu.Lock()
	f.set = &set
	var todo []*shared
	for gvr, s := range f.running {
		if f.opts.Namespaced(gvr) {
			todo = append(todo, s)
		}
	}
	f.mu.Unlock()
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, s := range todo {
		wg.Go(func() {
			if err := s.hold(ctx); err != nil {
				errs[i] = fmt.Errorf("informer for %s: %w", s.gvr, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FilterModes returns the filter mode (ModeServer, ModeClient) of each
// running informer that lists with a shardSelector, by resource; for
// metrics.
func (f *Factory) FilterModes() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for gvr, s := range f.running {
		if m := s.mode.Load(); m != nil && s.cur.Load().set != nil {
			out[gvr.String()] = *m
		}
	}
	return out
}

// BucketCounts returns the number of cached objects of each bucket of the
// set held, all sharded informers of namespaced resources together (whole
// informers left out); nil while no set is held. For metrics: it costs a
// hash per cached namespace.
func (f *Factory) BucketCounts() map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set == nil {
		return nil
	}
	out := map[int]int{}
	for _, b := range f.set.Members() {
		out[int(b)] = 0
	}
	for _, s := range f.running {
		gen := s.cur.Load()
		if gen.set == nil {
			continue
		}
		idx := gen.informer.GetIndexer()
		for _, ns := range idx.ListIndexFuncValues(cache.NamespaceIndex) {
			if !gen.set.Contains(ns) {
				continue
			}
			keys, err := idx.IndexKeys(cache.NamespaceIndex, ns)
			if err == nil {
				out[int(shard.Of(ns, gen.set.Buckets))] += len(keys)
			}
		}
	}
	return out
}

// swapState is what a generation being replaced tells its relays: the
// sentinel that ends its events, and, once ready is closed, the changes
// to deliver before handing over to the next generation.
type swapState struct {
	sentinel *Object
	ready    chan struct{}
	changes  []change
	// handovers are closed by each relay once it delivered the changes;
	// set before ready is closed.
	handovers map[*relay]chan struct{}
}

// change is one event of a swap.
type change struct {
	old, new *Object // new nil: a delete; old nil: an add
	key      string
	initial  bool
}

// deliver gives r's handler the changes, then hands over; it runs on the
// relay's listener goroutine of the old generation, after every earlier
// event of it.
func (st *swapState) deliver(r *relay) {
	select {
	case <-st.ready:
	case <-r.gone:
		return
	}
	select {
	case <-r.gone:
		return
	default:
	}
	h, ok := st.handovers[r]
	if !ok {
		return
	}
	for _, c := range st.changes {
		switch {
		case c.old == nil:
			r.handler.OnAdd(c.new, c.initial)
		case c.new == nil:
			r.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: c.key, Obj: c.old})
		default:
			r.handler.OnUpdate(c.old, c.new)
		}
	}
	close(h)
}

// hold swaps s to a generation of the Factory's set, unless it has one.
func (s *shared) hold(ctx context.Context) error {
	select {
	case s.swapping <- struct{}{}:
		defer func() { <-s.swapping }()
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return nil
	}
	// Of Holds that overlap, the last one's set wins, whichever swaps
	// first.
	s.factory.mu.Lock()
	set := s.factory.set
	s.factory.mu.Unlock()
	old := s.cur.Load()
	if old.set != nil && old.set.Equal(*set) {
		return waitGenSynced(ctx, s, old)
	}
	next := s.newGeneration(set, true)
	if err := waitGenSynced(ctx, s, next); err != nil {
		next.stop()
		return err
	}
	s.swap(ctx, old, next)
	return nil
}

// waitGenSynced waits until gen has synced, ctx ends or s stops.
func waitGenSynced(ctx context.Context, s *shared, gen *generation) error {
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-s.stop:
			return true, nil
		default:
		}
		return gen.informer.HasSynced(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the cache to sync: %w", err)
	}
	return nil
}

// swap replaces old, the current generation, with next, synced and still
// gated; see Hold.
func (s *shared) swap(ctx context.Context, old, next *generation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		next.stop()
		return
	default:
	}
	s.cur.Store(next)
	st := &swapState{
		sentinel:  &Object{},
		ready:     make(chan struct{}),
		handovers: make(map[*relay]chan struct{}, len(s.relays)),
	}
	st.sentinel.Name = "\x00metactl-swap"
	// A handler of an old generation that never synced has had part of
	// its initial objects at most: it gets the new one's, as a new
	// handler.
	handedOver := old.informer.HasSynced() && s.barrier(ctx, old, st)
	if handedOver {
		st.changes = changes(old, next, st.sentinel)
	}
	for r := range s.relays {
		h := make(chan struct{})
		l := &relayListener{r: r, gen: next, handover: h, skipInitial: handedOver}
		if ok, err := r.register(next, l); err != nil || !ok {
			if err != nil {
				klog.FromContext(ctx).Error(err, "Moving an event handler to the new cache", "resource", s.gvr)
			}
			continue
		}
		if handedOver {
			st.handovers[r] = h
		} else {
			close(h)
		}
	}
	close(st.ready)
	next.lw.release()
	if handedOver {
		go s.retire(old, st)
	} else {
		s.retireNow(old)
	}
}

// retireNow stops old and forgets the relays' registrations on it. Called
// with s.mu held.
func (s *shared) retireNow(old *generation) {
	old.stop()
	for r := range s.relays {
		r.forget(old)
	}
}

// barrier ends old's events with the sentinel and waits until old's
// store has it, after every event before it; false when ctx ended first.
func (s *shared) barrier(ctx context.Context, old *generation, st *swapState) bool {
	old.retiring.Store(st)
	old.lw.requestBarrier(st.sentinel)
	key := st.sentinel.key()
	err := wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		_, ok, _ := old.informer.GetIndexer().GetByKey(key)
		return ok, nil
	})
	return err == nil
}

// retire stops old once every relay has handed over (or is gone), or s
// stops.
func (s *shared) retire(old *generation, st *swapState) {
	defer func() {
		old.stop()
		for r := range st.handovers {
			r.forget(old)
		}
	}()
	for r, h := range st.handovers {
		select {
		case <-h:
		case <-r.gone:
		case <-s.stop:
			return
		}
	}
}

// changes are the events that take a handler from old's objects to
// next's; see Hold.
func changes(old, next *generation, sentinel *Object) []change {
	oldIdx, nextIdx := old.informer.GetIndexer(), next.informer.GetIndexer()
	var out []change
	for _, obj := range nextIdx.List() {
		o, ok := obj.(*Object)
		if !ok {
			continue
		}
		prev, found, _ := oldIdx.GetByKey(o.key())
		if !found {
			out = append(out, change{new: o, key: o.key(), initial: old.set != nil && !old.set.Contains(o.Namespace)})
			continue
		}
		if p, ok := prev.(*Object); ok && p.ResourceVersion != o.ResourceVersion {
			out = append(out, change{old: p, new: o, key: o.key()})
		}
	}
	for _, obj := range oldIdx.List() {
		p, ok := obj.(*Object)
		if !ok || p == sentinel {
			continue
		}
		if _, found, _ := nextIdx.GetByKey(p.key()); found {
			continue
		}
		if next.set == nil || next.set.Contains(p.Namespace) {
			out = append(out, change{old: p, key: p.key()})
		}
	}
	return out
}
