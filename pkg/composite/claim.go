package composite

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
)

// claimChildren returns the parent's children of every declared resource,
// after adopting matching orphans and releasing children that stopped
// matching. Candidates come from the informer indexes: the parent's own
// children and the orphans of its namespace. They are counted for t's
// sync hook request (engine.Target.CountRequest) before any is decoded,
// adopted or released: over its limit nothing is.
func (c *Controller) claimChildren(ctx context.Context, t *engine.Target, selector labels.Selector) (map[*children.Resource]children.Set, error) {
	parent := t.Object
	candidates := make([][]*informer.Object, len(c.children.Resources))
	for i, child := range c.children.Resources {
		candidates[i] = child.Informer.OwnedByMeta(parent.GetNamespace(), parent.GetUID())
		// Only orphans that match the selector can be adopted, and none by
		// a parent being deleted.
		if parent.GetDeletionTimestamp() == nil {
			// "" for a cluster-scoped parent: every namespace.
			candidates[i] = append(candidates[i], child.Informer.OrphansMeta(parent.GetNamespace(), selector)...)
		}
		if err := t.CountRequest(ctx, "children of "+child.GroupVersionResource().GroupResource().String(), candidates[i]); err != nil {
			return nil, err
		}
	}
	claimer := ownership.NewClaimer(parent, c.parent.GroupVersionKind(), selector, c.canAdopt(parent))
	claimer.OnWrite = history.WritesOf(c.name)
	out := make(map[*children.Resource]children.Set, len(c.children.Resources))
	var errs []error
	for i, child := range c.children.Resources {
		claimer.Resource = child.GroupVersionResource().GroupResource().String()
		claimed, err := claimer.Claim(ctx, c.opts.Client.Resource(child.GroupVersionResource()), informer.DecodeAll(candidates[i]))
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
