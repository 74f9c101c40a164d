package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// Watches are the informers one controller holds: each acquired with its
// event handler, waited for together, released together. A controller
// acquires them in Start and releases them in Stop; Watches is not safe
// for concurrent use.
type Watches struct {
	factory *informer.Factory
	// whole acquires informers of every namespace (Options.Whole).
	whole bool
	held  []*informer.Informer
}

// newWatches returns an empty set of watches on factory's informers:
// those of every namespace (Factory.AcquireWhole) when whole.
func newWatches(factory *informer.Factory, whole bool) *Watches {
	return &Watches{factory: factory, whole: whole}
}

// Watch acquires the informer of gvr and adds handler to it (nil: none).
// On error the informer is held anyway; Release releases it.
func (w *Watches) Watch(gvr schema.GroupVersionResource, handler cache.ResourceEventHandler) (*informer.Informer, error) {
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

// Release releases every informer held. It is idempotent.
func (w *Watches) Release() {
	for _, inf := range w.held {
		inf.Release()
	}
	w.held = nil
}
