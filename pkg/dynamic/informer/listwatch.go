package informer

import (
	"context"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	"github.com/metactl/metactl/internal/shard"
)

// Filter modes of a sharded informer (FilterModes).
const (
	// ModeServer: the API server filtered the last list: its response
	// carried metadata.shardInfo (built-in resources), or no object
	// outside the set (kube-apiserver 1.36 filters custom resources
	// without shardInfo), and no watch event since was outside it.
	ModeServer = "server"
	// ModeClient: the API server sent objects outside the set (a server
	// without the ShardedListAndWatch gate, or a watch it did not
	// filter); the informer dropped them.
	ModeClient = "client"
)

// KeepingLister is implemented by the ListerWatchers (of a
// ListerWatcherFunc) that can leave out, while they decode a list, the
// objects whose namespace keep refuses: objectclient.Client's, through
// NewObjectListKeeping. A sharded informer lists through it when it can,
// so that a list the server did not filter costs the objects of the set,
// not every object (docs/scaling.md, "Caches per bucket"); otherwise it
// filters the decoded list. ListKeeping's answer is ListWithContext's,
// less the objects keep refuses; it must not call keep after it returns.
type KeepingLister interface {
	ListKeeping(ctx context.Context, opts metav1.ListOptions, keep func(namespace string) bool) (runtime.Object, error)
}

// listWatch is the ListerWatcher of one generation of a shared informer:
// the factory's, with, when set is not nil, the set's shardSelector on
// every list and watch and only the objects of set kept from their
// answers. Without a set it changes nothing of the requests or their
// answers.
//
// It also carries what a change of set needs of a generation:
//   - gated (the new generation): after its first list, its watch events
//     and further lists wait for release, so that its store stays the
//     snapshot of that list while the swap compares it with the old;
//   - barrier (the old generation): once requested, its watch ends with an
//     Added event of a sentinel object after every event already
//     forwarded, and it lists and watches no more: the sentinel reaching a
//     handler means the handler has had every event of this generation.
type listWatch struct {
	inner cache.ListerWatcherWithContext
	raw   cache.ListerWatcher
	// set filters, when not nil; an empty set lists nothing and watches
	// nothing, without a request.
	set *shard.Set
	// mode is told whether the API server filtered each list.
	mode func(server bool)
	// events counts the watch events received, before any filter.
	events *atomic.Int64
	// stop ends what waits: the generation's stop.
	stop <-chan struct{}

	mu       sync.Mutex
	listed   bool
	released chan struct{} // closed: no gate
	barrier  chan struct{} // closed: the barrier is requested
	sentinel *Object
	sealed   bool // the sentinel was sent: nothing more
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newListWatch(raw cache.ListerWatcher, set *shard.Set, gated bool, mode func(bool), events *atomic.Int64, stop <-chan struct{}) *listWatch {
	l := &listWatch{inner: cache.ToListerWatcherWithContext(raw), raw: raw, set: set, mode: mode, events: events, stop: stop,
		released: closedChan, barrier: make(chan struct{})}
	if gated {
		l.released = make(chan struct{})
	}
	return l
}

// IsWatchListSemanticsUnSupported makes a sharded generation list, then
// watch (the mode is read from the list's shardInfo); without a set it is
// the factory's ListerWatcher's.
func (l *listWatch) IsWatchListSemanticsUnSupported() bool {
	return l.set != nil || watchlist.DoesClientNotSupportWatchListSemantics(l.raw)
}

func (l *listWatch) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.released:
	default:
		close(l.released)
	}
}

// requestBarrier asks for the sentinel; see listWatch.
func (l *listWatch) requestBarrier(sentinel *Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sentinel = sentinel
	close(l.barrier)
}

// wait blocks until ctx ends or the generation stops: a sealed generation's
// reflector waits here for its end.
func (l *listWatch) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-l.stop:
		return context.Canceled
	}
}

// waitReleased waits for the gate to open; false when ctx ended or the
// generation stopped first.
func (l *listWatch) waitReleased(done <-chan struct{}) bool {
	select {
	case <-l.released:
		return true
	case <-done:
		return false
	case <-l.stop:
		return false
	}
}

func (l *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	sealed, listed := l.sealed, l.listed
	l.mu.Unlock()
	if sealed {
		return nil, l.wait(ctx)
	}
	if listed && !l.waitReleased(ctx.Done()) {
		return nil, l.wait(ctx)
	}
	obj, err := l.list(ctx, opts)
	if err == nil {
		l.mu.Lock()
		l.listed = true
		l.mu.Unlock()
	}
	return obj, err
}

// list lists for the set; see listWatch.
func (l *listWatch) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if l.set == nil {
		return l.inner.ListWithContext(ctx, opts)
	}
	if l.set.Len() == 0 {
		return &ObjectList{ListMeta: metav1.ListMeta{ResourceVersion: opts.ResourceVersion}}, nil
	}
	opts.ShardSelector = l.set.Selector()
	var obj runtime.Object
	var err error
	if keeping, ok := l.raw.(KeepingLister); ok {
		obj, err = keeping.ListKeeping(ctx, opts, l.set.Contains)
	} else {
		obj, err = l.inner.ListWithContext(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*ObjectList)
	if !ok {
		return obj, nil
	}
	kept := list.Items[:0]
	for i := range list.Items {
		if l.set.Contains(list.Items[i].Namespace) {
			kept = append(kept, list.Items[i])
		}
	}
	outside := list.leftOut + len(list.Items) - len(kept)
	clear(list.Items[len(kept):])
	list.Items = kept
	list.leftOut = 0
	if opts.ShardSelector != "" && l.mode != nil {
		// The server filtered when it says so (shardInfo, built-in
		// resources) or sent nothing outside the set: kube-apiserver
		// 1.36 filters custom resources without saying so.
		echoed := list.ShardInfo != nil && list.ShardInfo.Selector == opts.ShardSelector
		l.mode(echoed || outside == 0)
	}
	return list, nil
}

func (l *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	l.mu.Lock()
	sealed := l.sealed
	l.mu.Unlock()
	if sealed {
		// Nothing more, until the generation stops; an error would be
		// logged as a failed watch.
		p := &proxyWatch{l: l, out: make(chan watch.Event), done: make(chan struct{}), idle: true}
		go p.run()
		return p, nil
	}
	var inner watch.Interface
	if l.set == nil || l.set.Len() > 0 {
		if l.set != nil {
			opts.ShardSelector = l.set.Selector()
		}
		var err error
		if inner, err = l.inner.WatchWithContext(ctx, opts); err != nil {
			return nil, err
		}
	}
	p := &proxyWatch{l: l, inner: inner, out: make(chan watch.Event), done: make(chan struct{}),
		ready: opts.SendInitialEvents == nil || !*opts.SendInitialEvents}
	go p.run()
	return p, nil
}

// proxyWatch forwards a watch's events (none when inner is nil: the empty
// set's), keeping the set's, waiting for the gate and ending with the
// sentinel once the barrier is requested.
type proxyWatch struct {
	l     *listWatch
	inner watch.Interface
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
	// ready is false while a watch list's initial events stream: the
	// sentinel must not land in the reflector's temporary store.
	ready bool
	// idle: the watch of a sealed generation, which sends nothing.
	idle bool
}

func (p *proxyWatch) ResultChan() <-chan watch.Event { return p.out }

func (p *proxyWatch) Stop() {
	p.once.Do(func() {
		close(p.done)
		if p.inner != nil {
			p.inner.Stop()
		}
	})
}

func (p *proxyWatch) run() {
	defer close(p.out)
	defer p.Stop()
	var events <-chan watch.Event
	if p.inner != nil {
		events = p.inner.ResultChan()
	}
	for {
		barrier := p.l.barrier
		if !p.ready || p.idle {
			barrier = nil
		}
		select {
		case <-p.done:
			return
		case <-p.l.stop:
			return
		case <-barrier:
			p.l.mu.Lock()
			sentinel := p.l.sentinel
			p.l.sealed = true
			p.l.mu.Unlock()
			select {
			case p.out <- watch.Event{Type: watch.Added, Object: sentinel}:
			case <-p.done:
			case <-p.l.stop:
			}
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if p.l.events != nil && ev.Type != watch.Bookmark && ev.Type != watch.Error {
				p.l.events.Add(1)
			}
			if !p.keep(ev) {
				continue
			}
			if !p.l.waitReleased(p.done) {
				return
			}
			select {
			case p.out <- ev:
			case <-p.done:
				return
			case <-p.l.stop:
				return
			}
		}
	}
}

// keep reports whether ev is forwarded: events of objects outside the set
// are not (the server may not have filtered), and a watch list's end
// makes the proxy ready for the barrier.
func (p *proxyWatch) keep(ev watch.Event) bool {
	o, ok := ev.Object.(*Object)
	if !ok {
		return true
	}
	switch ev.Type {
	case watch.Bookmark:
		if !p.ready && o.Annotations.Get(metav1.InitialEventsAnnotationKey) == "true" {
			p.ready = true
		}
		return true
	case watch.Added, watch.Modified, watch.Deleted:
		if p.l.set == nil || p.l.set.Contains(o.Namespace) {
			return true
		}
		// The server sent what it should have filtered (a watch served
		// from etcd is not filtered in 1.36): the client filters.
		if p.l.mode != nil && p.l.set.Len() < p.l.set.Buckets {
			p.l.mode(false)
		}
		return false
	}
	return true
}
