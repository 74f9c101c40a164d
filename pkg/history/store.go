package history

import (
	"container/list"
	"sync"

	"github.com/metactl/metactl/pkg/metrics"
)

// DefaultSyncsPerObject is the default of StoreOptions.SyncsPerObject.
const DefaultSyncsPerObject = 5

// DefaultMaxBytes is the default of StoreOptions.MaxBytes: 8 MiB. A
// typical sync record (a trigger or two, one to three hook calls, a few
// writes) is estimated at 1-2 KiB, so 8 MiB keeps several thousand syncs:
// the last syncs of every object of a controller of a few thousand, and
// at 10,000 objects those of the objects synced last. Those are the ones
// someone asks about: a failing object is retried at least every
// --max-retry-delay, so it stays among them while it fails. It is small
// beside the informer caches of such a process (hundreds of MiB at
// 10,000 parents).
const DefaultMaxBytes = 8 << 20

// StoreOptions configure a Store.
type StoreOptions struct {
	// SyncsPerObject is how many of an object's last syncs are kept;
	// default DefaultSyncsPerObject.
	SyncsPerObject int
	// MaxBytes bounds the estimated memory of the record (see
	// Sync.Size): past it, the objects synced longest ago are dropped
	// whole. Default (0) DefaultMaxBytes.
	MaxBytes int64
}

// Store keeps the last syncs of each object, by controller and work-queue
// key, within a memory budget. Safe for concurrent use.
type Store struct {
	opts StoreOptions

	mu      sync.Mutex
	objects map[objectKey]*list.Element // of *object
	// lru orders the objects by their last Put, least recent first.
	lru   list.List
	bytes int64
}

type objectKey struct{ controller, key string }

// object is the record of one object.
type object struct {
	key   objectKey
	syncs []*Sync // oldest first
	bytes int64   // the syncs' sizes and objectOverhead
}

// objectOverhead estimates the memory of an object's entry in the Store,
// beside its syncs and its key's strings: the map entry, the list element,
// the object and its slice of SyncsPerObject pointers.
const objectOverhead = 48 + 48 + 64 + 8*DefaultSyncsPerObject

// NewStore returns an empty Store.
func NewStore(opts StoreOptions) *Store {
	if opts.SyncsPerObject <= 0 {
		opts.SyncsPerObject = DefaultSyncsPerObject
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	return &Store{opts: opts, objects: map[objectKey]*list.Element{}}
}

// Put records s, a finished sync of the object queued as key by
// controller (a name that tells controllers of different kinds apart, see
// ControllerID). s must not change afterwards. Objects synced longest ago
// are dropped while the record exceeds the budget.
func (st *Store) Put(controller, key string, s *Sync) {
	if st == nil || s == nil {
		return
	}
	k := objectKey{controller, key}
	size := s.Size()
	st.mu.Lock()
	defer st.mu.Unlock()
	before := st.bytes
	el, ok := st.objects[k]
	if !ok {
		o := &object{key: k, bytes: objectOverhead + alloc(len(controller)) + alloc(len(key))}
		el = st.lru.PushBack(o)
		st.objects[k] = el
		st.bytes += o.bytes
	} else {
		st.lru.MoveToBack(el)
	}
	o := el.Value.(*object)
	o.syncs = append(o.syncs, s)
	o.bytes += size
	st.bytes += size
	for len(o.syncs) > st.opts.SyncsPerObject {
		st.dropOldestLocked(o)
	}
	evicted := 0
	for st.bytes > st.opts.MaxBytes {
		front := st.lru.Front()
		if front.Value.(*object) == o {
			// The object synced last alone exceeds the budget: its
			// oldest syncs go, then it.
			if len(o.syncs) > 1 {
				st.dropOldestLocked(o)
				continue
			}
		}
		st.removeLocked(front)
		evicted++
	}
	metrics.HistoryBytes.Add(float64(st.bytes - before))
	if evicted > 0 {
		metrics.HistoryEvictions.Add(float64(evicted))
	}
}

func (st *Store) dropOldestLocked(o *object) {
	size := o.syncs[0].Size()
	o.syncs[0] = nil
	o.syncs = o.syncs[1:]
	o.bytes -= size
	st.bytes -= size
}

func (st *Store) removeLocked(el *list.Element) {
	o := el.Value.(*object)
	st.lru.Remove(el)
	delete(st.objects, o.key)
	st.bytes -= o.bytes
}

// Get returns the recorded syncs of the object queued as key by
// controller, newest first; nil when none is kept.
func (st *Store) Get(controller, key string) []*Sync {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	el, ok := st.objects[objectKey{controller, key}]
	if !ok {
		return nil
	}
	syncs := el.Value.(*object).syncs
	out := make([]*Sync, len(syncs))
	for i, s := range syncs {
		out[len(syncs)-1-i] = s
	}
	return out
}

// Forget drops the record of an object that is gone.
func (st *Store) Forget(controller, key string) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if el, ok := st.objects[objectKey{controller, key}]; ok {
		before := st.bytes
		st.removeLocked(el)
		metrics.HistoryBytes.Add(float64(st.bytes - before))
	}
}

// bytesUsed returns the estimated memory of the record.
func (st *Store) bytesUsed() int64 {
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.bytes
}

// objectCount returns the number of objects recorded.
func (st *Store) objectCount() int {
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.objects)
}

// ControllerID names a controller in a Store: its kind, lower case
// ("compositecontroller"), and name, for controllers of different kinds
// may share a name.
func ControllerID(kind, name string) string { return kind + "/" + name }
