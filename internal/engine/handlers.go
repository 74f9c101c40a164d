package engine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// Enqueue queues key for a sync, for t.
func (e *Engine) Enqueue(key Key, t trigger.Trigger) { e.queue.AddFor(key, t) }

// enqueueFor queues key, for t, for an event about obj (nil: an event that
// always counts), unless it is the echo of this controller's own write;
// see echo.Echoes. An event held while key is synced keeps t: if it is no
// echo, the sync after carries it.
func (e *Engine) enqueueFor(key Key, obj metav1.Object, t trigger.Trigger) {
	if e.echoes.ShouldEnqueue(key, obj, t) {
		e.queue.AddFor(key, t)
	}
}

// objectTrigger is the trigger of an event about obj, the synced object:
// CauseStart for an add of the informer's initial list (or of its cache
// when the controller starts on a running informer), CauseResync for an
// update that changed nothing (the informer's resync), else CauseObject
// with obj's generation.
func objectTrigger(obj metav1.Object, initial, resync bool) trigger.Trigger {
	switch {
	case initial:
		return trigger.Trigger{Cause: trigger.CauseStart}
	case resync:
		return trigger.Trigger{Cause: trigger.CauseResync}
	}
	return trigger.Trigger{Cause: trigger.CauseObject, Generation: obj.GetGeneration()}
}

// ObjectHandler returns the event handler of the informer of a resource
// whose objects the controller syncs: an object that concerns the
// controller (concerns nil: every object) is queued as key(obj) on every
// change, except the echoes of the controller's own writes and, with
// ignoreStatus, changes of only its status. deleted, when set, is told of
// deleted objects.
func (e *Engine) ObjectHandler(key func(metav1.Object) Key, concerns func(metav1.Object) bool, ignoreStatus bool, deleted func(metav1.Object)) cache.ResourceEventHandler {
	if concerns == nil {
		concerns = func(metav1.Object) bool { return true }
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if u, ok := obj.(*informer.Object); ok && concerns(u) {
				e.enqueueFor(key(u), u, objectTrigger(u, initial, false))
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || !(concerns(newU) || concerns(oldU)) {
				return
			}
			resync := oldU.GetResourceVersion() == newU.GetResourceVersion()
			if ignoreStatus && !resync && informer.OnlyStatusChanged(oldU, newU) {
				return
			}
			e.enqueueFor(key(newU), newU, objectTrigger(newU, false, resync))
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				e.echoes.Forget(u.GetUID())
				if deleted != nil {
					deleted(u)
				}
				// The sync of a gone object forgets what is known of it
				// (and costs a cache miss).
				e.enqueueFor(key(u), nil, objectTrigger(u, false, false))
			}
		},
	}
}

// Owners map the events of dependents (children, attachments) to the
// objects they concern.
type Owners struct {
	// Keys returns the queue keys of the objects that the controller
	// reference ref of dependent names, if they are the controller's.
	Keys func(dependent metav1.Object, ref *metav1.OwnerReference) []Key
	// Orphan, when set, is told of a dependent without a controller
	// reference that is not being deleted (composite: the parents that
	// may adopt it), with the trigger to queue them for.
	Orphan func(dependent metav1.Object, t trigger.Trigger)
	// Resource names the dependents' resource in triggers, group-qualified
	// ("configmaps", "deployments.apps"; see trigger.ObjectName).
	Resource string
}

// dependentTrigger is the trigger of an event about dependent: CauseStart
// for an add of the informer's initial list (the owner's own start
// trigger), else CauseDependent naming it.
func (o Owners) dependentTrigger(dependent metav1.Object, initial bool) trigger.Trigger {
	if initial {
		return trigger.Trigger{Cause: trigger.CauseStart}
	}
	return trigger.Trigger{Cause: trigger.CauseDependent, Object: trigger.ObjectName(o.Resource, dependent.GetNamespace(), dependent.GetName())}
}

// lazyTrigger is an event's trigger, built on first use only: most
// events of children at steady state are echoes of the controller's own
// writes, which need none.
type lazyTrigger struct {
	owners    Owners
	dependent metav1.Object
	initial   bool
	t         trigger.Trigger
}

func (l *lazyTrigger) get() trigger.Trigger {
	if l.t.Cause == "" {
		l.t = l.owners.dependentTrigger(l.dependent, l.initial)
	}
	return l.t
}

// enqueueLazily is enqueueFor with the trigger built only when needed.
func (e *Engine) enqueueLazily(key Key, obj metav1.Object, t *lazyTrigger) {
	if e.echoes.ShouldEnqueueFunc(key, obj, t.get) {
		e.queue.AddFor(key, t.get())
	}
}

// DependentHandler returns the event handler of the informer of a
// dependent resource: an event is mapped to the dependent's controller
// owner; when an update changes the owner, the previous one is queued too,
// for it lost a dependent; an orphan goes to owners.Orphan; a delete also
// queues the objects that waited for the deleted one to free a name
// (blockers).
func (e *Engine) DependentHandler(owners Owners) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if u, ok := obj.(*informer.Object); ok {
				e.enqueueOwner(owners, u, u, &lazyTrigger{owners: owners, dependent: u, initial: initial})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || oldU.GetResourceVersion() == newU.GetResourceVersion() {
				return // a resync: the owner's covers it
			}
			t := &lazyTrigger{owners: owners, dependent: newU}
			oldRef, newRef := metav1.GetControllerOfNoCopy(oldU), metav1.GetControllerOfNoCopy(newU)
			if oldRef != nil && (newRef == nil || oldRef.UID != newRef.UID) {
				for _, key := range owners.Keys(oldU, oldRef) {
					e.enqueueLazily(key, nil, t)
				}
			}
			e.enqueueOwner(owners, newU, newU, t)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				e.echoes.Forget(u.GetUID())
				e.enqueueOwner(owners, u, nil, &lazyTrigger{owners: owners, dependent: u})
				e.enqueueWaiters(owners, u)
			}
		},
	}
}

// enqueueWaiters queues the objects whose desired dependent could not be
// created because gone, now deleted, held its name (blockers).
func (e *Engine) enqueueWaiters(owners Owners, gone metav1.Object) {
	holder := trigger.ObjectName(owners.Resource, gone.GetNamespace(), gone.GetName())
	for _, key := range e.blockers.gone(holder) {
		e.queue.AddFor(key, trigger.Trigger{Cause: trigger.CauseDependent, Object: holder})
	}
}

// enqueueOwner queues the controller owner of dependent, for t, for an
// event about event (nil: always counts), or tells owners.Orphan of an
// orphan.
func (e *Engine) enqueueOwner(owners Owners, dependent, event metav1.Object, t *lazyTrigger) {
	if ref := metav1.GetControllerOfNoCopy(dependent); ref != nil {
		for _, key := range owners.Keys(dependent, ref) {
			e.enqueueLazily(key, event, t)
		}
		return
	}
	if owners.Orphan != nil && dependent.GetDeletionTimestamp() == nil {
		owners.Orphan(dependent, t.get())
	}
}
