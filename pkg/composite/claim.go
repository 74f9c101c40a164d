package composite

import (
	"context"
	"errors"
	"fmt"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/hooks"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// claimChildren returns the parent's children of every declared resource,
// after adopting matching orphans and releasing children that stopped
// matching. Candidates come from the informer indexes: the parent's own
// children and the orphans of its namespace.
func (c *Controller) claimChildren(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector) (map[*children.Resource]children.Set, error) {
	claimer := ownership.NewClaimer(parent, c.parent.GroupVersionKind(), selector, c.canAdopt(parent))
	orphanNamespace := parent.GetNamespace() // "" for a cluster-scoped parent: every namespace
	out := make(map[*children.Resource]children.Set, len(c.children))
	var errs []error
	for _, child := range c.children {
		candidates := append(child.Informer.OwnedBy(parent.GetUID()), child.Informer.Orphans(orphanNamespace)...)
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

// observedMap builds the hook request's children: a key for every declared
// child resource, even when it has no objects.
func (c *Controller) observedMap(observed map[*children.Resource]children.Set, hook *v1alpha1.Hook) hooks.ObjectMap {
	version := *hook.Version
	m := hooks.ObjectMap{}
	for _, child := range c.children {
		m.EnsureKey(child.APIVersion, child.Kind)
		for _, obj := range observed[child] {
			m.Insert(version, c.parent.Namespaced, obj)
		}
	}
	return m
}

// desiredChildren checks the hook's children and returns them by resource,
// ready to write: namespace defaulted, generated selector label added, the
// controller reference set. Any problem fails the whole response.
func (c *Controller) desiredChildren(parent *unstructured.Unstructured, selector labels.Selector, objs []*unstructured.Unstructured) (map[*children.Resource]children.Set, error) {
	out := make(map[*children.Resource]children.Set, len(c.children))
	for _, child := range c.children {
		out[child] = children.Set{}
	}
	generate := c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector
	ref := ownership.ControllerRef(parent, c.parent.GroupVersionKind())
	var errs []error
	for i, obj := range objs {
		if obj == nil {
			errs = append(errs, fmt.Errorf("children[%d] is null", i))
			continue
		}
		what := fmt.Sprintf("children[%d] (%s %s)", i, obj.GetKind(), obj.GetName())
		child := c.childrenByKind[obj.GetAPIVersion()+"/"+obj.GetKind()]
		if child == nil {
			errs = append(errs, fmt.Errorf("%s: %s %s is not a declared child resource of compositecontroller %s", what, obj.GetAPIVersion(), obj.GetKind(), c.name))
			continue
		}
		if obj.GetName() == "" {
			errs = append(errs, fmt.Errorf("%s: metadata.name is required", what))
			continue
		}
		obj = obj.DeepCopy()
		switch ns := obj.GetNamespace(); {
		case !child.Namespaced && ns != "":
			errs = append(errs, fmt.Errorf("%s: %s is cluster-scoped but the child has namespace %q", what, child.Name, ns))
			continue
		case !child.Namespaced:
		case ns == "" && parent.GetNamespace() == "":
			errs = append(errs, fmt.Errorf("%s: a namespaced child of a cluster-scoped parent needs metadata.namespace", what))
			continue
		case ns == "":
			obj.SetNamespace(parent.GetNamespace())
		case parent.GetNamespace() != "" && ns != parent.GetNamespace():
			errs = append(errs, fmt.Errorf("%s: namespace %q differs from the parent's namespace %q", what, ns, parent.GetNamespace()))
			continue
		}
		if generate {
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[ControllerUIDLabel] = string(parent.GetUID())
			obj.SetLabels(l)
		}
		if !selector.Matches(labels.Set(obj.GetLabels())) {
			errs = append(errs, fmt.Errorf("%s: labels %v do not match the parent's selector %q", what, obj.GetLabels(), selector))
			continue
		}
		key := children.Key(obj)
		if _, dup := out[child][key]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate child %s", what, key))
			continue
		}
		setControllerRef(obj, ref)
		out[child][key] = obj
	}
	return out, errors.Join(errs...)
}

// setControllerRef makes ref the object's only controller reference,
// keeping its other owner references.
func setControllerRef(obj *unstructured.Unstructured, ref metav1.OwnerReference) {
	refs := []metav1.OwnerReference{ref}
	for _, r := range obj.GetOwnerReferences() {
		if !ptr.Deref(r.Controller, false) {
			refs = append(refs, r)
		}
	}
	obj.SetOwnerReferences(refs)
}
