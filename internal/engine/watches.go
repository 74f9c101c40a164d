package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// DefaultMaxResources is the default of Options.MaxResources: the most
// distinct resources one controller watches, through its spec and its
// customize answers together. Each is an informer of the whole resource.
const DefaultMaxResources = 32

// Watches are the informers one controller holds: each acquired with its
// event handler, waited for together, released together. A controller
// acquires them in Start and releases them in Stop; Watches is not safe
// for concurrent use.
type Watches struct {
	factory *informer.Factory
	// whole acquires informers of every namespace (Options.Whole).
	whole bool
	held  []*informer.Informer
	// max is the most distinct resources the controller may watch (0:
	// any); distinct are those it watches.
	max      int
	distinct map[schema.GroupVersionResource]bool
}

// newWatches returns an empty set of watches on factory's informers:
// those of every namespace (Factory.AcquireWhole) when whole.
func newWatches(factory *informer.Factory, whole bool, max int) *Watches {
	return &Watches{factory: factory, whole: whole, max: max, distinct: map[schema.GroupVersionResource]bool{}}
}

// Watch acquires the informer of gvr and adds handler to it (nil: none).
// On error the informer is held anyway; Release releases it. A resource
// that would make more distinct resources than the controller may watch
// (Options.MaxResources) is not acquired: Watch returns an error that
// says so.
func (w *Watches) Watch(gvr schema.GroupVersionResource, handler cache.ResourceEventHandler) (*informer.Informer, error) {
	if !w.distinct[gvr] && w.max > 0 && len(w.distinct) >= w.max {
		return nil, fmt.Errorf("the spec names more than %d distinct resources (at %s), more than one controller may watch (--max-controller-resources): "+
			"split it into several controllers, or ask the platform to raise --max-controller-resources", w.max, gvr.GroupResource())
	}
	w.distinct[gvr] = true
	acquire := w.factory.Acquire
	if w.whole {
		acquire = w.factory.AcquireWhole
	}
	inf := acquire(gvr)
	w.held = append(w.held, inf)
	if handler == nil {
		return inf, nil
	}
	return inf, inf.AddEventHandler(handler)
}

// WaitForSync waits until every informer held has synced and delivered its
// initial objects to its handler; false when ctx ends first.
func (w *Watches) WaitForSync(ctx context.Context) bool {
	synced := make([]cache.InformerSynced, len(w.held))
	for i, inf := range w.held {
		synced[i] = inf.HasSynced
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// Distinct returns the number of distinct resources watched.
func (w *Watches) Distinct() int { return len(w.distinct) }

// Release releases every informer held. It is idempotent.
func (w *Watches) Release() {
	for _, inf := range w.held {
		inf.Release()
	}
	w.held = nil
}
