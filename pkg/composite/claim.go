package composite

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
)

// claimChildren returns the parent's children of every declared resource,
// after adopting matching orphans and releasing children that stopped
// matching. Candidates come from the informer indexes: the parent's own
// children and the orphans of its namespace.
func (c *Controller) claimChildren(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector) (map[*children.Resource]children.Set, error) {
	claimer := ownership.NewClaimer(parent, c.parent.GroupVersionKind(), selector, c.canAdopt(parent))
	claimer.OnWrite = history.WritesOf(c.name)
	orphanNamespace := parent.GetNamespace() // "" for a cluster-scoped parent: every namespace
	out := make(map[*children.Resource]children.Set, len(c.children.Resources))
	var errs []error
	for _, child := range c.children.Resources {
		candidates := child.Informer.OwnedBy(parent.GetNamespace(), parent.GetUID())
		// Only orphans that match the selector can be adopted, and none by
		// a parent being deleted.
		if parent.GetDeletionTimestamp() == nil {
			candidates = append(candidates, child.Informer.Orphans(orphanNamespace, selector)...)
		}
		claimer.Resource = child.GroupVersionResource().GroupResource().String()
		claimed, err := claimer.Claim(ctx, c.opts.Client.Resource(child.GroupVersionResource()), candidates)
		if err != nil {
			errs = append(errs, err)
		}
		set := make(children.Set, len(claimed))
		for _, obj := range claimed {
			set[children.Key(obj)] = obj
		}
		out[child] = set
	}
	return out, errors.Join(errs...)
}

// desiredChildren checks the hook's children (see children.Declared) and
// adds what a CompositeController requires: the generated selector label,
// and labels that match the parent's selector.
func (c *Controller) desiredChildren(parent *unstructured.Unstructured, selector labels.Selector, objs []*unstructured.Unstructured) (map[*children.Resource]children.Set, error) {
	generate := c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector
	ref := ownership.ControllerRef(parent, c.parent.GroupVersionKind())
	return c.children.Desired(parent, ref, "children", objs, func(obj *unstructured.Unstructured) error {
		if generate {
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[ControllerUIDLabel] = string(parent.GetUID())
			obj.SetLabels(l)
		}
		if !selector.Matches(labels.Set(obj.GetLabels())) {
			return fmt.Errorf("labels %v do not match the parent's selector %q", obj.GetLabels(), selector)
		}
		return nil
	})
}
