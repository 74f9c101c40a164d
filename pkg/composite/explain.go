package composite

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

var _ engine.Explainer = (*Controller)(nil)

// Key returns a parent's queue key (engine.Explainer).
func (c *Controller) Key(_ *engine.Watched, parent metav1.Object) engine.Key {
	return c.parentKey(parent)
}

// Selector describes spec.parentResource.labelSelector
// (engine.Explainer).
func (c *Controller) Selector(*engine.Watched) string {
	if ls := c.cc.Spec.ParentResource.LabelSelector; ls != nil {
		return "spec.parentResource.labelSelector " + metav1.FormatLabelSelector(ls)
	}
	return "every object"
}

// ExplainDependents lists the parent's children in the cache and, for
// rolling child resources, the ControllerRevision each belongs to and the
// parent's Updated condition (engine.Explainer).
func (c *Controller) ExplainDependents(parent *unstructured.Unstructured) ([]explain.Dependent, *explain.Rollout) {
	deps := engine.OwnedDependents(c.children, parent, nil)
	if c.revisions == nil {
		return deps, nil
	}
	latestPatch, _ := revisionPatch(parent, c.cc.Spec.ParentResource.RevisionHistory.FieldPaths)
	type childKey struct{ group, kind, name string }
	owner := map[childKey]string{}
	latest := map[string]bool{}
	for _, rev := range c.revisions.OwnedBy(parent.GetNamespace(), parent.GetUID()) {
		patch, groups, err := decodeRevision(rev)
		if err != nil {
			continue
		}
		latest[rev.GetName()] = latestPatch != nil && apply.Equal(patch, latestPatch)
		for _, g := range groups {
			for _, name := range g.Names {
				owner[childKey{g.APIGroup, g.Kind, name}] = rev.GetName()
			}
		}
	}
	for i := range deps {
		res := c.childResource(deps[i].Resource)
		if res == nil || !res.Method.IsRolling() {
			continue
		}
		gvk := res.GroupVersionKind()
		if rev := owner[childKey{gvk.Group, gvk.Kind, deps[i].Name}]; rev != "" {
			deps[i].Revision, deps[i].Latest = rev, latest[rev]
		}
	}
	return deps, updatedCondition(parent)
}

// childResource is the declared child resource named resource.group.
func (c *Controller) childResource(groupResource string) *children.Resource {
	for _, res := range c.children.Resources {
		if res.GroupVersionResource().GroupResource().String() == groupResource {
			return res
		}
	}
	return nil
}

// updatedCondition reads the parent's Updated condition; nil without one.
func updatedCondition(parent *unstructured.Unstructured) *explain.Rollout {
	conditions, _, _ := unstructured.NestedSlice(parent.Object, "status", "conditions")
	for _, raw := range conditions {
		cond, ok := raw.(map[string]any)
		if !ok || cond["type"] != ConditionUpdated {
			continue
		}
		str := func(k string) string { s, _ := cond[k].(string); return s }
		return &explain.Rollout{Status: str("status"), Reason: str("reason"), Message: str("message")}
	}
	return nil
}
