package decorator

import (
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// objectHandler enqueues objects of watched resource i that concern this
// controller: selected ones, and ones carrying its finalizer (to be
// finalized). Echoes of its own writes are skipped, and so are status-only
// changes when every rule of the resource ignores them.
func (c *Controller) objectHandler(i int, w *watchedResource) cache.ResourceEventHandler {
	concerns := func(obj metav1.Object) bool {
		return w.selects(obj) || finalizer.Has(obj, finalizerPrefix+c.name)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*informer.Object); ok && concerns(u) {
				c.enqueueFor(objectKey(i, u), u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || !(concerns(newU) || concerns(oldU)) {
				return
			}
			if w.ignoreStatus && oldU.GetResourceVersion() != newU.GetResourceVersion() && informer.OnlyStatusChanged(oldU, newU) {
				return
			}
			c.enqueueFor(objectKey(i, newU), newU)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				c.echoes.Forget(u.GetUID())
				// The sync of a gone object forgets its related
				// declarations (and costs a cache miss).
				c.enqueueFor(objectKey(i, u), nil)
			}
		},
	}
}

// attachmentHandler maps an attachment event to the decorated object that
// controls it, when the attachment is this controller's.
func (c *Controller) attachmentHandler() cache.ResourceEventHandler {
	enqueueOwner := func(u metav1.Object, event metav1.Object) {
		ref := metav1.GetControllerOfNoCopy(u)
		if ref == nil || u.GetAnnotations()[AttachmentAnnotation] != c.name {
			return
		}
		refGV, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			return
		}
		for i, w := range c.watched {
			gvk := w.GroupVersionKind()
			if gvk.Kind != ref.Kind || gvk.Group != refGV.Group {
				continue
			}
			namespace := ""
			if w.Namespaced {
				namespace = u.GetNamespace()
			}
			c.enqueueFor(objectKey(i, &metav1.ObjectMeta{Namespace: namespace, Name: ref.Name}), event)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if u, ok := obj.(*informer.Object); ok {
				enqueueOwner(u, u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldU, ok1 := oldObj.(*informer.Object)
			newU, ok2 := newObj.(*informer.Object)
			if !ok1 || !ok2 || oldU.GetResourceVersion() == newU.GetResourceVersion() {
				return
			}
			enqueueOwner(newU, newU)
		},
		DeleteFunc: func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				c.echoes.Forget(u.GetUID())
				enqueueOwner(u, nil)
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
