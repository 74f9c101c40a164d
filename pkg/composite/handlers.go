package composite

import (
	"github.com/metactl/metactl/pkg/dynamic/informer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// parentHandler enqueues a parent on every change, except the echoes of
// this controller's own writes and, with ignoreStatusChanges, changes of
// only its status.
func (c *Controller) parentHandler() cache.ResourceEventHandler {
	ignoreStatus := c.cc.Spec.ParentResource.IgnoreStatusChanges != nil && *c.cc.Spec.ParentResource.IgnoreStatusChanges
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*informer.Object); ok {
				c.enqueueFor(parentKey(u.GetNamespace(), u.GetName()), u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 {
				return
			}
			if ignoreStatus && oldU.GetResourceVersion() != newU.GetResourceVersion() && informer.OnlyStatusChanged(oldU, newU) {
				return
			}
			c.enqueueFor(parentKey(newU.GetNamespace(), newU.GetName()), newU)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				c.echoes.Forget(u.GetUID())
				c.forgetSelector(u.GetUID())
				c.enqueueFor(parentKey(u.GetNamespace(), u.GetName()), nil)
			}
		},
	}
}

// childHandler maps a child event to the parents it concerns: the
// controller owner (old and new, when the owner changed), or, for an
// orphan, every parent in its namespace whose selector matches it, since
// one of them may adopt it.
func (c *Controller) childHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*informer.Object); ok {
				c.enqueueOwnerOrCandidates(u, u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || oldU.GetResourceVersion() == newU.GetResourceVersion() {
				return // a resync: the parent's covers it
			}
			oldRef, newRef := metav1.GetControllerOfNoCopy(oldU), metav1.GetControllerOfNoCopy(newU)
			if oldRef != nil && (newRef == nil || oldRef.UID != newRef.UID) {
				c.enqueueOwner(oldU.GetNamespace(), oldRef, nil)
			}
			c.enqueueOwnerOrCandidates(newU, newU)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				c.echoes.Forget(u.GetUID())
				c.enqueueOwnerOrCandidates(u, nil)
			}
		},
	}
}

// enqueueFor enqueues key for an event about obj (nil: an event that always
// counts), unless it is the echo of this controller's own write; see
// echo.Echoes.
func (c *Controller) enqueueFor(key string, obj metav1.Object) {
	if c.echoes.ShouldEnqueue(key, obj) {
		c.loop.Add(key)
	}
}

// enqueueOwnerOrCandidates enqueues u's controller owner, or, for an
// orphan, the parents that may adopt it. event is the object of the event
// for echo filtering (nil: always counts).
func (c *Controller) enqueueOwnerOrCandidates(u metav1.Object, event metav1.Object) {
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		c.enqueueOwner(u.GetNamespace(), ref, event)
		return
	}
	if u.GetDeletionTimestamp() != nil {
		return
	}
	// An orphan: parents that may adopt it live in its namespace (any
	// namespace, for cluster-scoped parents).
	namespace := u.GetNamespace()
	if !c.parent.Namespaced {
		namespace = ""
	}
	childLabels := labels.Set(u.GetLabels())
	if c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector {
		// The selector is controller-uid=<the parent's UID>: one parent at
		// most, and none for an orphan without the label.
		uid, ok := childLabels[ControllerUIDLabel]
		if !ok {
			return
		}
		for _, parent := range c.parentInformer.ListMeta(namespace, nil) {
			if string(parent.UID) == uid {
				c.loop.Add(parentKey(parent.GetNamespace(), parent.GetName()))
				return
			}
		}
		return
	}
	for _, parent := range c.parentInformer.ListMeta(namespace, nil) {
		if selector := c.selectorOf(parent); selector != nil && selector.Matches(childLabels) {
			c.loop.Add(parentKey(parent.GetNamespace(), parent.GetName()))
		}
	}
}

// enqueueOwner enqueues the parent named by a controller reference, if the
// reference is to this controller's parent kind (in any version of its
// group).
func (c *Controller) enqueueOwner(childNamespace string, ref *metav1.OwnerReference, event metav1.Object) {
	gvk := c.parent.GroupVersionKind()
	refGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind != gvk.Kind || refGV.Group != gvk.Group {
		return
	}
	namespace := ""
	if c.parent.Namespaced {
		namespace = childNamespace
	}
	c.enqueueFor(parentKey(namespace, ref.Name), event)
}
