package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// ControllerRef returns the controller reference a child of parent carries.
func ControllerRef(parent metav1.Object, gvk schema.GroupVersionKind) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               parent.GetName(),
		UID:                parent.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// CanAdoptFunc checks, uncached, that the parent may adopt orphans now.
type CanAdoptFunc func(ctx context.Context) error

// Claimer claims children for one parent during one sync. It is not safe for
// concurrent use; create one per sync.
type Claimer struct {
	parent    metav1.Object
	parentRef metav1.OwnerReference
	selector  labels.Selector
	canAdopt  CanAdoptFunc

	// OnWrite, when set, is told of each adoption and release after its
	// request, as a patch of target "ownership", with the object
	// (trigger.ObjectName) and the error (the engine counts and records
	// it: history.WritesOf).
	OnWrite func(ctx context.Context, verb, target, object string, err error)
	// Resource names the candidates' resource in the sync's record,
	// group-qualified ("configmaps", "deployments.apps").
	Resource string

	checkOnce sync.Once
	checkErr  error
}

// NewClaimer returns a Claimer for parent, whose objects have gvk, adopting
// and keeping children that match selector. canAdopt is called at most once,
// before the first adoption.
func NewClaimer(parent metav1.Object, gvk schema.GroupVersionKind, selector labels.Selector, canAdopt CanAdoptFunc) *Claimer {
	return &Claimer{parent: parent, parentRef: ControllerRef(parent, gvk), selector: selector, canAdopt: canAdopt}
}

// Claim returns the candidates that are the parent's children after
// adopting and releasing as the package describes. client must address the
// candidates' resource (Namespace is applied per object). An error from one
// candidate does not stop the others; all errors are joined, and children
// claimed despite them are still returned.
func (c *Claimer) Claim(ctx context.Context, client dynamic.NamespaceableResourceInterface, candidates []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var claimed []*unstructured.Unstructured
	var errs []error
	parentDeleting := c.parent.GetDeletionTimestamp() != nil
	for _, obj := range candidates {
		ref := metav1.GetControllerOfNoCopy(obj)
		matches := c.selector.Matches(informer.LabelsOf(obj))
		switch {
		case obj.GetUID() == c.parent.GetUID():
			// A parent whose resource is also a child resource, and whose
			// labels match its own selector, is never its own child.
		case ref != nil && ref.UID == c.parent.GetUID():
			if matches || parentDeleting {
				claimed = append(claimed, obj)
				continue
			}
			if err := c.release(ctx, client, obj); err != nil {
				errs = append(errs, err)
				// Still ours until the release lands.
				claimed = append(claimed, obj)
			}
		case ref != nil:
			// Another controller's child.
		case parentDeleting || !matches || obj.GetDeletionTimestamp() != nil:
			// Not to be adopted.
		default:
			adopted, err := c.adopt(ctx, client, obj)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if adopted != nil {
				claimed = append(claimed, adopted)
			}
		}
	}
	return claimed, errors.Join(errs...)
}

func (c *Claimer) adopt(ctx context.Context, client dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	c.checkOnce.Do(func() {
		if c.canAdopt != nil {
			c.checkErr = c.canAdopt(ctx)
		}
	})
	if c.checkErr != nil {
		return nil, fmt.Errorf("cannot adopt %s: %w", describe(obj), c.checkErr)
	}
	refs := append(obj.GetOwnerReferences(), c.parentRef)
	patched, err := c.patchOwners(ctx, client, obj, refs)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adopting %s: %w", describe(obj), err)
	}
	klog.FromContext(ctx).V(4).Info("Adopted orphan", "child", describe(obj))
	return patched, nil
}

func (c *Claimer) release(ctx context.Context, client dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured) error {
	var refs []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID != c.parent.GetUID() {
			refs = append(refs, ref)
		}
	}
	_, err := c.patchOwners(ctx, client, obj, refs)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("releasing %s: %w", describe(obj), err)
	}
	klog.FromContext(ctx).V(4).Info("Released child that no longer matches the selector", "child", describe(obj))
	return nil
}

// patchOwners replaces obj's ownerReferences, on the preconditions that
// obj still has the same UID and resourceVersion.
func (c *Claimer) patchOwners(ctx context.Context, client dynamic.NamespaceableResourceInterface, obj *unstructured.Unstructured, refs []metav1.OwnerReference) (*unstructured.Unstructured, error) {
	if refs == nil {
		refs = []metav1.OwnerReference{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": refs,
		"uid":             obj.GetUID(),
		"resourceVersion": obj.GetResourceVersion(),
	}})
	if err != nil {
		return nil, err
	}
	patched, err := client.Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if c.OnWrite != nil {
		c.OnWrite(ctx, "patch", "ownership", trigger.ObjectName(c.Resource, obj.GetNamespace(), obj.GetName()), err)
	}
	return patched, err
}

func describe(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + cache.MetaObjectToName(obj).String()
}
