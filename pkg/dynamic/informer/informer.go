package informer

import (
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
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
}

// Factory starts, shares and stops informers of any resource.
type Factory struct {
	listerWatcher ListerWatcherFunc
	opts          Options

	mu      sync.Mutex
	running map[schema.GroupVersionResource]*shared
}

// shared is one running informer and the number of handles on it.
type shared struct {
	informer cache.SharedIndexInformer
	stop     chan struct{}
	refs     int
}

// NewFactory returns a Factory whose informers list and watch through
// listerWatcher.
func NewFactory(listerWatcher ListerWatcherFunc, opts Options) *Factory {
	return &Factory{listerWatcher: listerWatcher, opts: opts, running: map[schema.GroupVersionResource]*shared{}}
}

// Acquire returns a handle on the informer of gvr, starting the informer if
// no handle holds it. Release the handle when done.
func (f *Factory) Acquire(gvr schema.GroupVersionResource) *Informer {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.running[gvr]
	if !ok {
		informer := cache.NewSharedIndexInformer(f.listerWatcher(gvr), &Object{}, f.opts.Resync, cache.Indexers{
			cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
			indexOwnerUID:        ownerUIDIndexFunc,
			indexOrphans:         orphanIndexFunc,
		})
		s = &shared{informer: informer, stop: make(chan struct{})}
		f.running[gvr] = s
		go informer.Run(s.stop)
	}
	s.refs++
	return &Informer{factory: f, gvr: gvr, shared: s}
}

func (f *Factory) release(gvr schema.GroupVersionResource, s *shared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.refs--
	if s.refs == 0 {
		close(s.stop)
		if f.running[gvr] == s {
			delete(f.running, gvr)
		}
	}
}

// Counts returns the number of cached objects of each running informer,
// by resource; for metrics.
func (f *Factory) Counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.running))
	for gvr, s := range f.running {
		out[gvr.String()] = len(s.informer.GetIndexer().ListKeys())
	}
	return out
}

// Informer is one holder's handle on a shared informer. Handlers it adds are
// removed when it is released.
type Informer struct {
	factory *Factory
	gvr     schema.GroupVersionResource
	shared  *shared

	mu            sync.Mutex
	registrations []cache.ResourceEventHandlerRegistration
	released      bool
}

// GroupVersionResource returns the watched resource.
func (i *Informer) GroupVersionResource() schema.GroupVersionResource { return i.gvr }

// AddEventHandler adds a handler that receives every event of the informer
// from now on, starting with an add for every object already cached. As in
// client-go, the events of one handler are delivered in order from a single
// goroutine; a slow handler delays only itself.
func (i *Informer) AddEventHandler(handler cache.ResourceEventHandler) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.released {
		return fmt.Errorf("informer for %s: handle already released", i.gvr)
	}
	reg, err := i.shared.informer.AddEventHandler(handler)
	if err != nil {
		return fmt.Errorf("adding an event handler to the informer for %s: %w", i.gvr, err)
	}
	i.registrations = append(i.registrations, reg)
	return nil
}

// HasSynced reports whether the informer has listed its resource and every
// handler added through this handle has received the initial objects.
func (i *Informer) HasSynced() bool {
	if !i.shared.informer.HasSynced() {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, reg := range i.registrations {
		if !reg.HasSynced() {
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
	regs := i.registrations
	i.registrations = nil
	i.mu.Unlock()
	for _, reg := range regs {
		_ = i.shared.informer.RemoveEventHandler(reg)
	}
	i.factory.release(i.gvr, i.shared)
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
	obj, ok, err := i.shared.informer.GetIndexer().GetByKey(cache.NewObjectName(namespace, name).String())
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
	objs, err := i.shared.informer.GetIndexer().ByIndex(indexOwnerUID, string(uid))
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
	value := namespace
	if namespace == "" {
		value = allNamespaces
	}
	objs, err := i.shared.informer.GetIndexer().ByIndex(indexOrphans, value)
	if err != nil {
		return nil
	}
	return DecodeAll(objects(objs, selector))
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
		objs = i.shared.informer.GetIndexer().List()
	} else {
		objs, _ = i.shared.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
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
