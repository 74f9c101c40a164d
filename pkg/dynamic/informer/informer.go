package informer

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/shard"
)

const (
	// indexOwnerUID indexes objects by the UID of their controller owner.
	indexOwnerUID = "metactl/owner-uid"
	// indexOrphans indexes objects without a controller owner by namespace
	// (orphanKey) and under allNamespaces.
	indexOrphans  = "metactl/orphans"
	allNamespaces = "*"
)

// ListerWatcherFunc returns what lists and watches one resource in every
// namespace. Its lists are ObjectLists and its watch events carry *Object.
// objectclient.Client's ListerWatcher is one.
type ListerWatcherFunc func(gvr schema.GroupVersionResource) cache.ListerWatcher

// Options configure a Factory.
type Options struct {
	// Resync is the informers' resync period; 0 disables resyncs.
	Resync time.Duration
	// Namespaced reports whether a resource is namespaced (discovery
	// knows): the informers of namespaced resources are the ones Hold
	// filters. Default nil: Hold refuses to run, and AcquireWhole is
	// Acquire.
	Namespaced func(schema.GroupVersionResource) bool
}

// Factory starts, shares and stops informers of any resource.
type Factory struct {
	listerWatcher ListerWatcherFunc
	opts          Options

	mu      sync.Mutex
	running map[schema.GroupVersionResource]*shared
	whole   map[schema.GroupVersionResource]*shared
	// set is the set of buckets held (Hold); nil: none, nothing filtered.
	set *shard.Set
	// events count the watch events received per resource, whole and
	// sharded informers together, since the Factory was made; guarded by
	// eventsMu, not mu, which newGeneration's callers hold.
	eventsMu sync.Mutex
	events   map[schema.GroupVersionResource]*atomic.Int64
}

// eventCounter returns the counter of gvr's watch events.
func (f *Factory) eventCounter(gvr schema.GroupVersionResource) *atomic.Int64 {
	f.eventsMu.Lock()
	defer f.eventsMu.Unlock()
	c, ok := f.events[gvr]
	if !ok {
		if f.events == nil {
			f.events = map[schema.GroupVersionResource]*atomic.Int64{}
		}
		c = new(atomic.Int64)
		f.events[gvr] = c
	}
	return c
}

// WatchEvents returns the number of watch events (added, modified,
// deleted) received for each resource since the Factory was made, before
// the filter of a set held: what the API server sent. For metrics.
func (f *Factory) WatchEvents() map[string]int64 {
	f.eventsMu.Lock()
	defer f.eventsMu.Unlock()
	out := make(map[string]int64, len(f.events))
	for gvr, c := range f.events {
		out[gvr.String()] = c.Load()
	}
	return out
}

// NewFactory returns a Factory whose informers list and watch through
// listerWatcher.
func NewFactory(listerWatcher ListerWatcherFunc, opts Options) *Factory {
	return &Factory{listerWatcher: listerWatcher, opts: opts,
		running: map[schema.GroupVersionResource]*shared{}, whole: map[schema.GroupVersionResource]*shared{}}
}

// Acquire returns a handle on the informer of gvr, starting the informer if
// no handle holds it. Release the handle when done. While the Factory
// holds a set of buckets (Hold), the informer of a namespaced resource
// caches only the objects of the set's namespaces.
func (f *Factory) Acquire(gvr schema.GroupVersionResource) *Informer {
	return f.acquire(gvr, false)
}

// AcquireWhole is Acquire of an informer that caches every object of gvr
// whatever set the Factory holds: for the controllers that run whole
// (cluster-scoped parents). For a namespaced resource it is another
// informer than Acquire's, once a Factory may hold a set (Options.
// Namespaced is set); otherwise it is Acquire.
func (f *Factory) AcquireWhole(gvr schema.GroupVersionResource) *Informer {
	return f.acquire(gvr, f.opts.Namespaced != nil && f.opts.Namespaced(gvr))
}

func (f *Factory) acquire(gvr schema.GroupVersionResource, whole bool) *Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	running := f.running
	if whole {
		running = f.whole
	}
	s, ok := running[gvr]
	if !ok {
		s = &shared{factory: f, gvr: gvr, whole: whole, stop: make(chan struct{}), swapping: make(chan struct{}, 1)}
		s.cur.Store(s.newGeneration(f.setFor(gvr, whole), false))
		running[gvr] = s
	}
	s.refs++
	return &Informer{factory: f, gvr: gvr, shared: s}
}

// setFor is the set the informer of gvr keeps: nil (everything) when the
// Factory holds none, for a whole informer and for a cluster-scoped
// resource. Called with f.mu held.
func (f *Factory) setFor(gvr schema.GroupVersionResource, whole bool) *shard.Set {
	if f.set == nil || whole || f.opts.Namespaced == nil || !f.opts.Namespaced(gvr) {
		return nil
	}
	return f.set
}

func (f *Factory) release(s *shared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.refs--
	if s.refs == 0 {
		s.halt()
		running := f.running
		if s.whole {
			running = f.whole
		}
		if running[s.gvr] == s {
			delete(running, s.gvr)
		}
	}
}

// Counts returns the number of cached objects of each running informer,
// by resource; for metrics. A whole informer (AcquireWhole) of a
// namespaced resource counts under the resource followed by " (whole)".
func (f *Factory) Counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.running)+len(f.whole))
	for gvr, s := range f.running {
		out[gvr.String()] = len(s.indexer().ListKeys())
	}
	for gvr, s := range f.whole {
		out[gvr.String()+" (whole)"] = len(s.indexer().ListKeys())
	}
	return out
}

// shared is one informer and the number of handles on it. Its objects are
// those of its current generation, an underlying informer that a change
// of set (Hold) replaces.
type shared struct {
	factory *Factory
	gvr     schema.GroupVersionResource
	whole   bool
	refs    int // guarded by factory.mu

	// cur is the generation reads use.
	cur atomic.Pointer[generation]
	// mode is the filter mode of the last list with a selector; "" for
	// none.
	mode atomic.Pointer[string]
	// stop is closed when the last handle is released.
	stop     chan struct{}
	stopOnce sync.Once
	// swapping holds one token while a change of set runs.
	swapping chan struct{}

	// mu guards relays and orders handler registration with a swap.
	mu     sync.Mutex
	relays map[*relay]struct{}
}

// generation is one underlying informer of a shared informer, keeping
// the objects of set (nil: every object).
type generation struct {
	informer cache.SharedIndexInformer
	lw       *listWatch
	set      *shard.Set
	stopCh   chan struct{}
	once     sync.Once
	// retiring is set when a swap replaces this generation.
	retiring atomic.Pointer[swapState]
}

func (g *generation) stop() { g.once.Do(func() { close(g.stopCh) }) }

// newGeneration starts a generation keeping set's objects; gated, its
// store holds the snapshot of its first list until g.lw.release().
func (s *shared) newGeneration(set *shard.Set, gated bool) *generation {
	g := &generation{set: set, stopCh: make(chan struct{})}
	g.lw = newListWatch(s.factory.listerWatcher(s.gvr), set, gated, s.setMode, s.factory.eventCounter(s.gvr), g.stopCh)
	var lw cache.ListerWatcher = g.lw
	g.informer = cache.NewSharedIndexInformer(lw, &Object{}, s.factory.opts.Resync, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		indexOwnerUID:        ownerUIDIndexFunc,
		indexOrphans:         orphanIndexFunc,
	})
	go g.informer.Run(g.stopCh)
	return g
}

func (s *shared) setMode(server bool) {
	m := ModeClient
	if server {
		m = ModeServer
	}
	s.mode.Store(&m)
}

func (s *shared) indexer() cache.Indexer { return s.cur.Load().informer.GetIndexer() }

// halt stops the shared informer: the last handle is gone.
func (s *shared) halt() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cur.Load().stop()
	})
}

// Informer is one holder's handle on a shared informer. Handlers it adds are
// removed when it is released.
type Informer struct {
	factory *Factory
	gvr     schema.GroupVersionResource
	shared  *shared

	mu       sync.Mutex
	relays   []*relay
	released bool
}

// GroupVersionResource returns the watched resource.
func (i *Informer) GroupVersionResource() schema.GroupVersionResource { return i.gvr }

// AddEventHandler adds a handler that receives every event of the informer
// from now on, starting with an add for every object already cached. As in
// client-go, the events of one handler are delivered in order from a single
// goroutine; a slow handler delays only itself. When the Factory's set
// changes (Hold), the handler receives only what changed; see Hold.
func (i *Informer) AddEventHandler(handler cache.ResourceEventHandler) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.released {
		return fmt.Errorf("informer for %s: handle already released", i.gvr)
	}
	r, err := i.shared.addRelay(handler)
	if err != nil {
		return fmt.Errorf("adding an event handler to the informer for %s: %w", i.gvr, err)
	}
	i.relays = append(i.relays, r)
	return nil
}

// HasSynced reports whether the informer has listed its resource and every
// handler added through this handle has received the initial objects.
// Once true it stays true across changes of set.
func (i *Informer) HasSynced() bool {
	if !i.shared.cur.Load().informer.HasSynced() {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.relays {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Release removes this handle's handlers and gives up the handle; the
// informer stops when no handle holds it. Release is idempotent.
func (i *Informer) Release() {
	i.mu.Lock()
	if i.released {
		i.mu.Unlock()
		return
	}
	i.released = true
	relays := i.relays
	i.relays = nil
	i.mu.Unlock()
	for _, r := range relays {
		i.shared.removeRelay(r)
	}
	i.factory.release(i.shared)
}

// Get returns the cached object namespace/name (name alone for
// cluster-scoped resources), decoded: the caller owns it.
func (i *Informer) Get(namespace, name string) (*unstructured.Unstructured, bool) {
	o, ok := i.GetMeta(namespace, name)
	if !ok {
		return nil, false
	}
	u, err := o.Unstructured()
	if err != nil {
		utilruntime.HandleError(err)
		return nil, false
	}
	return u, true
}

// GetMeta returns the cached object namespace/name without decoding it.
func (i *Informer) GetMeta(namespace, name string) (*Object, bool) {
	obj, ok, err := i.shared.indexer().GetByKey(cache.NewObjectName(namespace, name).String())
	if err != nil || !ok {
		return nil, false
	}
	o, ok := obj.(*Object)
	return o, ok
}

// OwnedBy returns the cached objects whose controller owner has uid,
// decoded. namespace is the owner's: a namespaced owner controls only
// objects of its own namespace (as the garbage collector reads owner
// references), so an object elsewhere whose reference names its UID, a
// forged one, is left out; "" (a cluster-scoped owner) is every namespace.
func (i *Informer) OwnedBy(namespace string, uid types.UID) []*unstructured.Unstructured {
	return DecodeAll(i.OwnedByMeta(namespace, uid))
}

// OwnedByMeta is OwnedBy without decoding.
func (i *Informer) OwnedByMeta(namespace string, uid types.UID) []*Object {
	objs, err := i.shared.indexer().ByIndex(indexOwnerUID, string(uid))
	if err != nil {
		return nil
	}
	out := objects(objs, nil)
	if namespace != "" {
		out = slices.DeleteFunc(out, func(o *Object) bool { return o.Namespace != namespace })
	}
	return out
}

// Orphans returns the cached objects without a controller owner in
// namespace, or in every namespace when namespace is "", that match
// selector (nil for all), decoded. Only the objects that match are decoded.
func (i *Informer) Orphans(namespace string, selector labels.Selector) []*unstructured.Unstructured {
	return DecodeAll(i.OrphansMeta(namespace, selector))
}

// OrphansMeta is Orphans without decoding.
func (i *Informer) OrphansMeta(namespace string, selector labels.Selector) []*Object {
	value := namespace
	if namespace == "" {
		value = allNamespaces
	}
	objs, err := i.shared.indexer().ByIndex(indexOrphans, value)
	if err != nil {
		return nil
	}
	return objects(objs, selector)
}

// List returns the cached objects in namespace ("" for all) that match
// selector (nil for all), decoded. Only the objects that match are decoded.
func (i *Informer) List(namespace string, selector labels.Selector) []*unstructured.Unstructured {
	return DecodeAll(i.ListMeta(namespace, selector))
}

// ListMeta is List without decoding.
func (i *Informer) ListMeta(namespace string, selector labels.Selector) []*Object {
	var objs []any
	if namespace == "" {
		objs = i.shared.indexer().List()
	} else {
		objs, _ = i.shared.indexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	return objects(objs, selector)
}

// objects are the cached objects objs that match selector (nil for all).
func objects(objs []any, selector labels.Selector) []*Object {
	out := make([]*Object, 0, len(objs))
	for _, obj := range objs {
		if o, ok := obj.(*Object); ok && (selector == nil || selector.Matches(o.Labels)) {
			out = append(out, o)
		}
	}
	return out
}

// DecodeAll decodes cached objects into objects the caller owns; one that
// does not decode is reported (utilruntime.HandleError) and left out.
func DecodeAll(objs []*Object) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := o.Unstructured()
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		out = append(out, u)
	}
	return out
}

func ownerUIDIndexFunc(obj any) ([]string, error) {
	m, err := metaAccessor(obj)
	if err != nil {
		return nil, err
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

func orphanIndexFunc(obj any) ([]string, error) {
	m, err := metaAccessor(obj)
	if err != nil {
		return nil, err
	}
	if metav1.GetControllerOfNoCopy(m) != nil {
		return nil, nil
	}
	if ns := m.GetNamespace(); ns != "" {
		return []string{ns, allNamespaces}, nil
	}
	return []string{allNamespaces}, nil
}

func metaAccessor(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("object of type %T has no metadata", obj)
	}
	return m, nil
}
