package composite

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// parentHandler enqueues a parent on every change, except a change of only
// its status when ignoreStatusChanges is set. Resyncs (same
// resourceVersion) are always enqueued.
func (c *Controller) parentHandler() cache.ResourceEventHandler {
	ignoreStatus := c.cc.Spec.ParentResource.IgnoreStatusChanges != nil && *c.cc.Spec.ParentResource.IgnoreStatusChanges
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				c.enqueue(u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*unstructured.Unstructured)
			newU, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 {
				return
			}
			if c.echoes.IsEcho(newU) {
				return
			}
			if ignoreStatus && oldU.GetResourceVersion() != newU.GetResourceVersion() && onlyStatusChanged(oldU, newU) {
				return
			}
			c.enqueue(newU)
		},
		DeleteFunc: func(obj any) {
			if u := objectOf(obj); u != nil {
				c.echoes.Forget(u.GetUID())
				c.enqueue(u)
			}
		},
	}
}

// onlyStatusChanged reports whether two versions of an object differ in
// nothing but status and the metadata the server bumps with any write.
func onlyStatusChanged(oldU, newU *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		out := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k == "status" {
				continue
			}
			if k == "metadata" {
				md, _ := v.(map[string]any)
				mdCopy := make(map[string]any, len(md))
				for mk, mv := range md {
					if mk != "resourceVersion" && mk != "managedFields" {
						mdCopy[mk] = mv
					}
				}
				v = mdCopy
			}
			out[k] = v
		}
		return out
	}
	return reflect.DeepEqual(strip(oldU), strip(newU))
}

// childHandler maps a child event to the parents it concerns: the
// controller owner (old and new, when the owner changed), or, for an
// orphan, every parent in its namespace whose selector matches it, since
// one of them may adopt it.
func (c *Controller) childHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok && !c.echoes.IsEcho(u) {
				c.enqueueOwnerOrCandidates(u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*unstructured.Unstructured)
			newU, ok2 := newObj.(*unstructured.Unstructured)
			if !ok1 || !ok2 {
				return
			}
			if oldU.GetResourceVersion() == newU.GetResourceVersion() || c.echoes.IsEcho(newU) {
				return // a resync (the parent's covers it), or our own write
			}
			oldRef, newRef := metav1.GetControllerOfNoCopy(oldU), metav1.GetControllerOfNoCopy(newU)
			if oldRef != nil && (newRef == nil || oldRef.UID != newRef.UID) {
				c.enqueueOwner(oldU.GetNamespace(), oldRef)
			}
			c.enqueueOwnerOrCandidates(newU)
		},
		DeleteFunc: func(obj any) {
			if u := objectOf(obj); u != nil {
				c.echoes.Forget(u.GetUID())
				if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
					c.enqueueOwner(u.GetNamespace(), ref)
				}
			}
		},
	}
}

func (c *Controller) enqueueOwnerOrCandidates(u *unstructured.Unstructured) {
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		c.enqueueOwner(u.GetNamespace(), ref)
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
	for _, parent := range c.parentInformer.List(namespace, nil) {
		selector, err := c.childSelector(parent)
		if err == nil && selector.Matches(childLabels) {
			c.enqueue(parent)
		}
	}
}

// enqueueOwner enqueues the parent named by a controller reference, if the
// reference is to this controller's parent kind (in any version of its group).
func (c *Controller) enqueueOwner(childNamespace string, ref *metav1.OwnerReference) {
	gvk := c.parent.GroupVersionKind()
	refGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind != gvk.Kind || refGV.Group != gvk.Group {
		return
	}
	if c.parent.Namespaced {
		c.loop.Add(parentKey(childNamespace, ref.Name))
	} else {
		c.loop.Add(parentKey("", ref.Name))
	}
}

// objectOf unwraps the tombstone a delete event may carry.
func objectOf(obj any) *unstructured.Unstructured {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}
