package decorator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// isAttachment reports whether obj carries this controller's attachment
// annotation (a cached object's is read without building a map).
func (c *Controller) isAttachment(obj metav1.Object) bool {
	return informer.AnnotationsOf(obj).Get(AttachmentAnnotation) == c.name
}

// ownerKeys returns the keys of the decorated objects an attachment's
// controller reference names, when the attachment is this controller's;
// see engine.Owners.
func (c *Controller) ownerKeys(attachment metav1.Object, ref *metav1.OwnerReference) []engine.Key {
	if !c.isAttachment(attachment) {
		return nil // another decorator's, or a child of another kind of owner
	}
	refGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	var keys []engine.Key
	for _, w := range c.watched {
		gvk := w.GroupVersionKind()
		if gvk.Kind != ref.Kind || gvk.Group != refGV.Group {
			continue
		}
		namespace := ""
		if w.Namespaced {
			namespace = attachment.GetNamespace()
		}
		keys = append(keys, engine.Key{Resource: w.Watched, Namespace: namespace, Name: ref.Name})
	}
	return keys
}
