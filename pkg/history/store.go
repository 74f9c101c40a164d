package history

import "sync"

// DefaultSyncsPerObject is the default of StoreOptions.SyncsPerObject.
const DefaultSyncsPerObject = 5

// StoreOptions configure a Store.
type StoreOptions struct {
	// SyncsPerObject is how many of an object's last syncs are kept;
	// default DefaultSyncsPerObject.
	SyncsPerObject int
}

// Store keeps the last syncs of each object, by controller and work-queue
// key. Safe for concurrent use.
type Store struct {
	opts StoreOptions

	mu      sync.Mutex
	objects map[objectKey][]*Sync // oldest first
}

type objectKey struct{ controller, key string }

// NewStore returns an empty Store.
func NewStore(opts StoreOptions) *Store {
	if opts.SyncsPerObject <= 0 {
		opts.SyncsPerObject = DefaultSyncsPerObject
	}
	return &Store{opts: opts, objects: map[objectKey][]*Sync{}}
}

// Put records s, a finished sync of the object queued as key by
// controller. s must not change afterwards.
func (st *Store) Put(controller, key string, s *Sync) {
	if st == nil || s == nil {
		return
	}
	k := objectKey{controller, key}
	st.mu.Lock()
	defer st.mu.Unlock()
	syncs := append(st.objects[k], s)
	if over := len(syncs) - st.opts.SyncsPerObject; over > 0 {
		syncs = append(syncs[:0:0], syncs[over:]...)
	}
	st.objects[k] = syncs
}

// Get returns the recorded syncs of the object queued as key by
// controller, newest first; nil when none is kept.
func (st *Store) Get(controller, key string) []*Sync {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	syncs := st.objects[objectKey{controller, key}]
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
	delete(st.objects, objectKey{controller, key})
	st.mu.Unlock()
}
