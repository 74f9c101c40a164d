package composite

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// ownerKeys returns the key of the parent a child's controller reference
// names, if the reference is to this controller's parent kind (in any
// version of its group); see engine.Owners.
func (c *Controller) ownerKeys(child metav1.Object, ref *metav1.OwnerReference) []engine.Key {
	gvk := c.parent.GroupVersionKind()
	refGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind != gvk.Kind || refGV.Group != gvk.Group {
		return nil
	}
	namespace := ""
	if c.parent.Namespaced {
		namespace = child.GetNamespace()
	}
	return []engine.Key{{Resource: c.parents, Namespace: namespace, Name: ref.Name}}
}

// enqueueCandidates enqueues the parents that may adopt an orphan, for t
// (candidateParents).
func (c *Controller) enqueueCandidates(orphan metav1.Object, t trigger.Trigger) {
	for _, key := range c.candidateParents(orphan) {
		c.eng.Enqueue(key, t)
	}
}

// candidateParents returns the keys of the cached parents that may adopt
// an orphan: those in its namespace (any namespace, for cluster-scoped
// parents) whose selector matches it.
func (c *Controller) candidateParents(orphan metav1.Object) []engine.Key {
	namespace := orphan.GetNamespace()
	if !c.parent.Namespaced {
		namespace = ""
	}
	childLabels := informer.LabelsOf(orphan)
	if c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector {
		// The selector is controller-uid=<the parent's UID>: one parent at
		// most, and none for an orphan without the label.
		uid, ok := childLabels.Lookup(ControllerUIDLabel)
		if !ok {
			return nil
		}
		for _, parent := range c.parents.Informer.ListMeta(namespace, nil) {
			if string(parent.UID) == uid {
				return []engine.Key{c.parentKey(parent)}
			}
		}
		return nil
	}
	var keys []engine.Key
	for _, parent := range c.parents.Informer.ListMeta(namespace, nil) {
		if selector := c.selectorOf(parent); selector != nil && selector.Matches(childLabels) {
			keys = append(keys, c.parentKey(parent))
		}
	}
	return keys
}
