package controller

import (
	"github.com/metactl/metactl/pkg/dynamic/informer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Enqueue queues key for a sync.
func (e *Engine) Enqueue(key string) { e.queue.Add(key) }

// EnqueueFor queues key for an event about obj (nil: an event that always
// counts), unless it is the echo of this controller's own write; see
// echo.Echoes.
func (e *Engine) EnqueueFor(key string, obj metav1.Object) {
	if e.echoes.ShouldEnqueue(key, obj) {
		e.queue.Add(key)
	}
}

// ObjectHandler returns the event handler of the informer of a resource
// whose objects the controller syncs: an object that concerns the
// controller (concerns nil: every object) is queued as key(obj) on every
// change, except the echoes of the controller's own writes and, with
// ignoreStatus, changes of only its status. deleted, when set, is told of
// deleted objects.
func (e *Engine) ObjectHandler(key func(metav1.Object) string, concerns func(metav1.Object) bool, ignoreStatus bool, deleted func(metav1.Object)) cache.ResourceEventHandler {
	if concerns == nil {
		concerns = func(metav1.Object) bool { return true }
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*informer.Object); ok && concerns(u) {
				e.EnqueueFor(key(u), u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || !(concerns(newU) || concerns(oldU)) {
				return
			}
			if ignoreStatus && oldU.GetResourceVersion() != newU.GetResourceVersion() && informer.OnlyStatusChanged(oldU, newU) {
				return
			}
			e.EnqueueFor(key(newU), newU)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				e.echoes.Forget(u.GetUID())
				if deleted != nil {
					deleted(u)
				}
				// The sync of a gone object forgets what is known of it
				// (and costs a cache miss).
				e.EnqueueFor(key(u), nil)
			}
		},
	}
}

// Owners map the events of dependents (children, attachments) to the
// objects they concern.
type Owners struct {
	// Keys returns the queue keys of the objects that the controller
	// reference ref of dependent names, if they are the controller's.
	Keys func(dependent metav1.Object, ref *metav1.OwnerReference) []string
	// Orphan, when set, is told of a dependent without a controller
	// reference that is not being deleted (composite: the parents that
	// may adopt it).
	Orphan func(dependent metav1.Object)
}

// DependentHandler returns the event handler of the informer of a
// dependent resource: an event is mapped to the dependent's controller
// owner; when an update changes the owner, the previous one is queued too,
// for it lost a dependent; an orphan goes to owners.Orphan.
func (e *Engine) DependentHandler(owners Owners) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*informer.Object); ok {
				e.enqueueOwner(owners, u, u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || oldU.GetResourceVersion() == newU.GetResourceVersion() {
				return // a resync: the owner's covers it
			}
			oldRef, newRef := metav1.GetControllerOfNoCopy(oldU), metav1.GetControllerOfNoCopy(newU)
			if oldRef != nil && (newRef == nil || oldRef.UID != newRef.UID) {
				for _, key := range owners.Keys(oldU, oldRef) {
					e.EnqueueFor(key, nil)
				}
			}
			e.enqueueOwner(owners, newU, newU)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				e.echoes.Forget(u.GetUID())
				e.enqueueOwner(owners, u, nil)
			}
		},
	}
}

// enqueueOwner queues the controller owner of dependent, for an event
// about event (nil: always counts), or tells owners.Orphan of an orphan.
func (e *Engine) enqueueOwner(owners Owners, dependent, event metav1.Object) {
	if ref := metav1.GetControllerOfNoCopy(dependent); ref != nil {
		for _, key := range owners.Keys(dependent, ref) {
			e.EnqueueFor(key, event)
		}
		return
	}
	if owners.Orphan != nil && dependent.GetDeletionTimestamp() == nil {
		owners.Orphan(dependent)
	}
}
