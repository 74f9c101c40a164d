package engine

import (
	"sync"

	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

// blockers map the objects that hold the names of desired dependents
// (children.Result.Blocked) to the objects whose syncs wait for them to
// go, so that the delete event of such a holder, which concerns no object
// of this controller by owner, queues them again.
//
// An entry is added by a sync that found a name taken, and dropped when
// the holder is deleted (its waiters queued) or when its waiter is gone
// (forget, forgetIf). An entry of a waiter that no longer asks for that
// name stays until then: it costs at most one sync more. It is safe for
// concurrent use.
type blockers struct {
	mu sync.Mutex
	// waiting: holder (trigger.ObjectName) → the keys waiting for it.
	waiting map[string]map[Key]struct{}
	// holders: key → the holders it waits for.
	holders map[Key]map[string]struct{}
}

// holderName names a blocked dependent's name holder as the dependents'
// informer handler does (Owners.Resource, group-qualified).
func holderName(b children.Blocked) string {
	return trigger.ObjectName(b.Resource.GroupVersionResource().GroupResource().String(), b.Namespace, b.Name)
}

// wait records that key waits for the holders of blocked to go.
func (bs *blockers) wait(key Key, blocked []children.Blocked) {
	if len(blocked) == 0 {
		return
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.waiting == nil {
		bs.waiting, bs.holders = map[string]map[Key]struct{}{}, map[Key]map[string]struct{}{}
	}
	for _, b := range blocked {
		h := holderName(b)
		if bs.waiting[h] == nil {
			bs.waiting[h] = map[Key]struct{}{}
		}
		bs.waiting[h][key] = struct{}{}
		if bs.holders[key] == nil {
			bs.holders[key] = map[string]struct{}{}
		}
		bs.holders[key][h] = struct{}{}
	}
}

// gone returns the keys that waited for holder, which is gone, and
// forgets them as its waiters.
func (bs *blockers) gone(holder string) []Key {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	waiters := bs.waiting[holder]
	if len(waiters) == 0 {
		return nil
	}
	delete(bs.waiting, holder)
	keys := make([]Key, 0, len(waiters))
	for key := range waiters {
		keys = append(keys, key)
		delete(bs.holders[key], holder)
		if len(bs.holders[key]) == 0 {
			delete(bs.holders, key)
		}
	}
	return keys
}

// forgetIf drops what the keys that forget reports wait for.
func (bs *blockers) forgetIf(forget func(Key) bool) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for key, hs := range bs.holders {
		if !forget(key) {
			continue
		}
		for h := range hs {
			delete(bs.waiting[h], key)
			if len(bs.waiting[h]) == 0 {
				delete(bs.waiting, h)
			}
		}
		delete(bs.holders, key)
	}
}

// forget drops what key waits for.
func (bs *blockers) forget(key Key) { bs.forgetIf(func(k Key) bool { return k == key }) }
