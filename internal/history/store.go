package history

import (
	"container/list"
	"slices"
	"sync"
	"unsafe"

	"github.com/metactl/metactl/internal/metrics"
)

// DefaultSyncsPerObject is the default of StoreOptions.SyncsPerObject:
// enough that the sync that mattered is still there after a controller
// edit and a few resyncs have each added one to every object.
const DefaultSyncsPerObject = 20

// DefaultMaxBytesPerObject is the default of
// StoreOptions.MaxBytesPerObject: 32 KiB, the syncs of a typical object
// (1-2 KiB each) in full, fewer of an object whose syncs are large.
const DefaultMaxBytesPerObject = 32 << 10

// DefaultMaxBytes is the default of StoreOptions.MaxBytes: 4 MiB. A
// typical sync record (a trigger or two, one to three hook calls, a few
// writes) is estimated at 1-2 KiB, so 4 MiB keeps a few thousand syncs:
// the last DefaultSyncsPerObject syncs of every object of a controller of
// a hundred or two, the last few of one of several hundred (an object
// that was synced a few times takes less), and at 10,000 objects those of
// the objects synced last. Past the budget the
// objects whose newest sync succeeded go first, so that a wave of no-op
// syncs (a resync of 10,000 parents) does not push out a failing object
// between its retries; and each object keeps its last failed sync beside
// its window, so that its last error stays however many syncs followed.
// The budget is all used at 10,000 parents, where the informer caches
// take about 64 MiB: it was measured to add its own size, and the garbage
// collector's headroom on it, to the peak RSS (docs/performance.md).
const DefaultMaxBytes = 4 << 20

// StoreOptions configure a Store.
type StoreOptions struct {
	// SyncsPerObject is how many of an object's last syncs are kept;
	// default DefaultSyncsPerObject. An object's last failed sync is kept
	// besides, when none of those failed.
	SyncsPerObject int
	// MaxBytesPerObject bounds the estimated memory of one object's syncs
	// (see Sync.Size): past it, its oldest syncs go, down to its newest
	// (and its last failed one). Default (0) DefaultMaxBytesPerObject.
	MaxBytesPerObject int64
	// MaxBytes bounds the estimated memory of the record (see
	// Sync.Size): past it, objects are dropped whole, those whose newest
	// sync succeeded first, each kind synced longest ago first. Default
	// (0) DefaultMaxBytes.
	MaxBytes int64
}

// Store keeps the last syncs of each object, by controller and work-queue
// key, within a memory budget. Safe for concurrent use.
type Store struct {
	opts StoreOptions
	// overhead estimates the memory of an object's entry beside its syncs
	// and its key's strings: the map entry, the list element, the object
	// and its slice of SyncsPerObject pointers.
	overhead int64

	mu      sync.Mutex
	objects map[objectKey]*list.Element // of *object
	// succeeded orders the objects whose newest sync succeeded, failing
	// the others (failed, waiting, cancelled), each by their last Put,
	// least recent first. succeeded is evicted first.
	//
	// This is not internal/lru, metactl's bounded cache, because its
	// eviction is not least recently used first: two orders share one
	// budget (an object whose newest sync succeeded goes before any
	// other), the object being put goes last and shrinks first (its
	// oldest syncs, then its last failure), and an object's size changes
	// in place on every Put. An lru.Cache would serve here only as an
	// ordered map with sizes, two of them without bounds under this
	// eviction loop, and would add an allocation per object to a record
	// whose memory was measured (docs/performance.md).
	succeeded, failing list.List
	bytes              int64
}

type objectKey struct{ controller, key string }

// object is the record of one object.
type object struct {
	key   objectKey
	syncs []*Sync // oldest first
	// failed is the object's last failed sync when it has left syncs and
	// none of syncs failed; else nil.
	failed *Sync
	bytes  int64 // the syncs' sizes, failed's and the overhead
	// in is the list the object is in.
	in *list.List
}

// NewStore returns an empty Store.
func NewStore(opts StoreOptions) *Store {
	if opts.SyncsPerObject <= 0 {
		opts.SyncsPerObject = DefaultSyncsPerObject
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxBytesPerObject <= 0 {
		opts.MaxBytesPerObject = DefaultMaxBytesPerObject
	}
	overhead := 48 + 48 + int64(unsafe.Sizeof(object{})) + alloc(8*opts.SyncsPerObject)
	return &Store{opts: opts, overhead: overhead, objects: map[objectKey]*list.Element{}}
}

// Limits returns what the store keeps of each object: its last syncs
// (at most syncs, within maxBytesPerObject bytes), and of all objects
// within maxBytes; for `metactl explain` to say.
func (st *Store) Limits() (syncs int, maxBytesPerObject, maxBytes int64) {
	if st == nil {
		return 0, 0, 0
	}
	return st.opts.SyncsPerObject, st.opts.MaxBytesPerObject, st.opts.MaxBytes
}

// succeeded tells a sync that succeeded from one that failed, waits or
// was cancelled.
func succeeded(s *Sync) bool { return s.Outcome.Result == "success" }

// Put records s, a finished sync of the object queued as key by
// controller (a name that tells controllers of different kinds apart, see
// ControllerID). s must not change afterwards. While the record exceeds
// the budget objects are dropped: those whose newest sync succeeded
// first, then the others, each synced longest ago first.
func (st *Store) Put(controller, key string, s *Sync) {
	if st == nil || s == nil {
		return
	}
	k := objectKey{controller, key}
	size := s.Size()
	in := &st.failing
	if succeeded(s) {
		in = &st.succeeded
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	before := st.bytes
	el, ok := st.objects[k]
	if !ok {
		o := &object{key: k, bytes: st.overhead + alloc(len(controller)) + alloc(len(key)), in: in}
		el = in.PushBack(o)
		st.objects[k] = el
		st.bytes += o.bytes
	} else if o := el.Value.(*object); o.in != in {
		o.in.Remove(el)
		el = in.PushBack(o)
		o.in = in
		st.objects[k] = el
	} else {
		in.MoveToBack(el)
	}
	o := el.Value.(*object)
	o.syncs = append(o.syncs, s)
	o.bytes += size
	st.bytes += size
	if !succeeded(s) && o.failed != nil {
		// The window holds a newer failure.
		st.dropFailedLocked(o)
	}
	for len(o.syncs) > st.opts.SyncsPerObject || len(o.syncs) > 1 && o.bytes > st.opts.MaxBytesPerObject {
		st.dropOldestLocked(o)
	}
	evicted := 0
	for st.bytes > st.opts.MaxBytes {
		victim := st.victimLocked(o)
		if victim.Value.(*object) == o {
			// The object synced last alone exceeds the budget: its
			// oldest syncs go, then its last failure, then it.
			if len(o.syncs) > 1 {
				st.dropOldestLocked(o)
				continue
			}
			if o.failed != nil {
				st.dropFailedLocked(o)
				continue
			}
		}
		st.removeLocked(victim)
		evicted++
	}
	metrics.HistoryBytes.Add(float64(st.bytes - before))
	if evicted > 0 {
		metrics.HistoryEvictions.Add(float64(evicted))
	}
}

// victimLocked returns the object to evict next, while o is being put:
// the one synced longest ago among those whose newest sync succeeded,
// else among the others; o itself (at the back of its list) only when it
// is alone.
func (st *Store) victimLocked(o *object) *list.Element {
	for _, l := range []*list.List{&st.succeeded, &st.failing} {
		if front := l.Front(); front != nil && front.Value.(*object) != o {
			return front
		}
	}
	return st.objects[o.key]
}

// dropOldestLocked drops the oldest sync of o's window; a failed one is
// kept as o.failed when no other in the window failed.
func (st *Store) dropOldestLocked(o *object) {
	oldest := o.syncs[0]
	copy(o.syncs, o.syncs[1:])
	o.syncs[len(o.syncs)-1] = nil
	o.syncs = o.syncs[:len(o.syncs)-1]
	if !succeeded(oldest) && !slices.ContainsFunc(o.syncs, func(s *Sync) bool { return !succeeded(s) }) {
		if o.failed != nil {
			st.dropFailedLocked(o)
		}
		o.failed = oldest
		return
	}
	size := oldest.Size()
	o.bytes -= size
	st.bytes -= size
}

func (st *Store) dropFailedLocked(o *object) {
	size := o.failed.Size()
	o.failed = nil
	o.bytes -= size
	st.bytes -= size
}

func (st *Store) removeLocked(el *list.Element) {
	o := el.Value.(*object)
	o.in.Remove(el)
	delete(st.objects, o.key)
	st.bytes -= o.bytes
}

// Get returns the recorded syncs of the object queued as key by
// controller, newest first, then its last failed sync when the others
// hold no failure; nil when none is kept.
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
	o := el.Value.(*object)
	out := make([]*Sync, 0, len(o.syncs)+1)
	for i := len(o.syncs) - 1; i >= 0; i-- {
		out = append(out, o.syncs[i])
	}
	if o.failed != nil {
		out = append(out, o.failed)
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
