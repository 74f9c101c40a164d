package manager

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// refreshDiscoveryOnCRDChanges watches CRDs: one created or established
// changes what discovery serves. Bursts of CRD events coalesce into one
// refresh at a time.
func (m *Manager) refreshDiscoveryOnCRDChanges(ctx context.Context) (stop func(), err error) {
	// Metadata only: CRD schemas can be large, and any change of a CRD,
	// its status included, bumps its metadata's resourceVersion.
	// Built as client-go's metadatainformer builds it, without that
	// package: it imports client-go/informers (every API group's
	// informers), which would grow the binary and its memory from start.
	client := m.metadata.Resource(crdResource)
	crds := cache.NewSharedIndexInformer(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
				return client.List(ctx, options)
			},
			WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
				return client.Watch(ctx, options)
			},
		}, m.metadata),
		&metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	requests := make(chan struct{}, 1)
	request := func(any) {
		select {
		case requests <- struct{}{}:
		default:
		}
	}
	if _, err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    request,
		UpdateFunc: func(_, obj any) { request(obj) },
		DeleteFunc: request,
	}); err != nil {
		return nil, err
	}
	stopInformer := make(chan struct{})
	go crds.Run(stopInformer)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-requests:
				if err := m.resources.Refresh(ctx); err != nil {
					klog.FromContext(ctx).V(2).Info("Refreshing discovery after a CRD change", "err", err)
				}
			}
		}
	}()
	return func() { close(stopInformer) }, nil
}
