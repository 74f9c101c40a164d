package composite

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// selectorCache keeps each parent's child selector by UID, valid for one
// generation of the parent (spec.selector is in its spec), so that an
// orphan's event, which concerns every parent of its namespace, reads their
// cached metadata instead of decoding them. Safe for concurrent use.
type selectorCache struct {
	mu      sync.Mutex
	entries map[types.UID]selectorEntry
}

type selectorEntry struct {
	generation int64
	selector   labels.Selector // nil: the parent has no valid selector
}

// selectorOf returns parent's child selector, or nil when it has none that
// is valid (the sync reports why). With generateSelector, orphans' events
// need no selector (enqueueCandidates compares the UID label).
func (c *Controller) selectorOf(parent *informer.Object) labels.Selector {
	s := &c.selectors
	s.mu.Lock()
	e, ok := s.entries[parent.UID]
	s.mu.Unlock()
	if ok && e.generation == parent.Generation {
		return e.selector
	}
	e = selectorEntry{generation: parent.Generation}
	if u, err := parent.Unstructured(); err == nil {
		if selector, err := c.childSelector(u); err == nil {
			e.selector = selector
		}
	}
	s.mu.Lock()
	if s.entries == nil {
		s.entries = map[types.UID]selectorEntry{}
	}
	s.entries[parent.UID] = e
	s.mu.Unlock()
	return e.selector
}

// forgetSelector drops the cached selector of a deleted parent.
func (c *Controller) forgetSelector(uid types.UID) {
	c.selectors.mu.Lock()
	delete(c.selectors.entries, uid)
	c.selectors.mu.Unlock()
}
