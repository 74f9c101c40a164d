package composite

import (
	"context"
	"errors"
	"fmt"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// childSet holds one parent's children of one resource by namespace/name.
type childSet map[string]*unstructured.Unstructured

// childKey names a child within its resource.
func childKey(obj metav1.Object) string {
	return parentKey(obj.GetNamespace(), obj.GetName())
}

// claimChildren returns the parent's children of every declared resource,
// after adopting matching orphans and releasing children that stopped
// matching. Candidates come from the informer indexes: the parent's own
// children and the orphans of its namespace.
func (c *Controller) claimChildren(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector) (map[*childResource]childSet, error) {
	claimer := ownership.NewClaimer(parent, c.parent.GroupVersionKind(), selector, c.canAdopt(parent))
	orphanNamespace := parent.GetNamespace() // "" for a cluster-scoped parent: every namespace
	out := make(map[*childResource]childSet, len(c.children))
	var errs []error
	for _, child := range c.children {
		candidates := append(child.informer.OwnedBy(parent.GetUID()), child.informer.Orphans(orphanNamespace)...)
		claimed, err := claimer.Claim(ctx, c.opts.Client.Resource(child.GroupVersionResource()), candidates)
		if err != nil {
			errs = append(errs, err)
		}
		set := make(childSet, len(claimed))
		for _, obj := range claimed {
			set[childKey(obj)] = obj
		}
		out[child] = set
	}
	return out, errors.Join(errs...)
}

// observedMap builds the hook request's children: a key for every declared
// child resource, even when it has no objects.
func (c *Controller) observedMap(parent *unstructured.Unstructured, observed map[*childResource]childSet, hook *v1alpha1.Hook) hooks.ObjectMap {
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
func (c *Controller) desiredChildren(parent *unstructured.Unstructured, selector labels.Selector, children []*unstructured.Unstructured) (map[*childResource]childSet, error) {
	out := make(map[*childResource]childSet, len(c.children))
	for _, child := range c.children {
		out[child] = childSet{}
	}
	generate := c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector
	ref := ownership.ControllerRef(parent, c.parent.GroupVersionKind())
	var errs []error
	for i, obj := range children {
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
		key := childKey(obj)
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

// manageChildren makes the observed children the desired ones: it deletes
// children no longer desired, creates missing ones, and updates the others
// as each resource's update strategy says. It goes on past failures and
// returns them all.
func (c *Controller) manageChildren(ctx context.Context, parent *unstructured.Unstructured, observed, desired map[*childResource]childSet) error {
	logger := klog.FromContext(ctx)
	var errs []error
	for _, child := range c.children {
		client := c.opts.Client.Resource(child.GroupVersionResource())
		for key, obj := range observed[child] {
			if _, keep := desired[child][key]; keep || obj.GetDeletionTimestamp() != nil {
				continue
			}
			if err := c.deleteChild(ctx, child, obj); err != nil {
				errs = append(errs, err)
			}
		}
		for key, want := range desired[child] {
			have, exists := observed[child][key]
			if !exists {
				created := want.DeepCopy()
				if err := apply.SetLastApplied(created, want.Object); err != nil {
					errs = append(errs, fmt.Errorf("creating %s %s: %w", child.Kind, key, err))
					continue
				}
				metrics.ObjectWrites.WithLabelValues(c.name, "create", "child").Inc()
				_, err := client.Namespace(want.GetNamespace()).Create(ctx, created, metav1.CreateOptions{})
				switch {
				case apierrors.IsAlreadyExists(err):
					// Someone else's, or our own not yet cached: not an error.
					logger.V(4).Info("Child already exists", "kind", child.Kind, "child", key)
				case err != nil:
					errs = append(errs, fmt.Errorf("creating %s %s: %w", child.Kind, key, err))
				default:
					logger.V(4).Info("Created child", "kind", child.Kind, "child", key)
				}
				continue
			}
			if have.GetDeletionTimestamp() != nil || child.method == v1alpha1.ChildUpdateOnDelete {
				continue // recreated once it is gone / never updated
			}
			merged, changed, err := apply.Apply(have, want)
			if err != nil {
				errs = append(errs, fmt.Errorf("merging %s %s: %w", child.Kind, key, err))
				continue
			}
			if !changed {
				continue
			}
			switch child.method {
			case v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateRollingRecreate:
				// Deleted now, created by the sync its deletion triggers.
				if err := c.deleteChild(ctx, child, have); err != nil {
					errs = append(errs, err)
				}
			default:
				metrics.ObjectWrites.WithLabelValues(c.name, "update", "child").Inc()
				if _, err := client.Namespace(have.GetNamespace()).Update(ctx, merged, metav1.UpdateOptions{}); err != nil {
					errs = append(errs, wrapWriteError(fmt.Errorf("updating %s %s: %w", child.Kind, key, err)))
					continue
				}
				logger.V(4).Info("Updated child", "kind", child.Kind, "child", key)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteChild deletes a child in the background, on the precondition that
// it is still the object that was observed.
func (c *Controller) deleteChild(ctx context.Context, child *childResource, obj *unstructured.Unstructured) error {
	metrics.ObjectWrites.WithLabelValues(c.name, "delete", "child").Inc()
	err := c.opts.Client.Resource(child.GroupVersionResource()).Namespace(obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(obj.GetUID())},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced by another object of that name
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", child.Kind, childKey(obj), err)
	}
	klog.FromContext(ctx).V(4).Info("Deleted child", "kind", child.Kind, "child", childKey(obj))
	return nil
}
