// Package finalizer adds and removes a controller's finalizer on objects
// of any resource.
//
// Every write is a JSON merge patch of metadata.finalizers carrying the
// object's UID and resourceVersion as preconditions, so a concurrent change
// makes it fail with a conflict (retried by the caller) instead of losing
// another controller's finalizer.
package finalizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// Has reports whether obj carries the finalizer name.
func Has(obj metav1.Object, name string) bool {
	return slices.Contains(obj.GetFinalizers(), name)
}

// HeldByGarbageCollector reports whether obj, being deleted, waits for the
// garbage collector to delete (foreground) or orphan its dependents: while
// it does, the dependents are the garbage collector's, not a controller's.
func HeldByGarbageCollector(obj metav1.Object) bool {
	return obj.GetDeletionTimestamp() != nil &&
		(Has(obj, metav1.FinalizerDeleteDependents) || Has(obj, metav1.FinalizerOrphanDependents))
}

// Add adds name to obj's finalizers, unless it has it, and returns the
// object as written (or obj unchanged).
func Add(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, name string) (*unstructured.Unstructured, error) {
	finalizers, change := Added(obj, name)
	if !change {
		return obj, nil
	}
	return set(ctx, client, obj, finalizers)
}

// Remove removes name from obj's finalizers, if it has it, and returns the
// object as written (or obj unchanged).
func Remove(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, name string) (*unstructured.Unstructured, error) {
	finalizers, change := Removed(obj, name)
	if !change {
		return obj, nil
	}
	return set(ctx, client, obj, finalizers)
}

// Added returns obj's finalizers with name added, and false (and nil)
// when obj has it already.
func Added(obj metav1.Object, name string) ([]string, bool) {
	if Has(obj, name) {
		return nil, false
	}
	return append(slices.Clone(obj.GetFinalizers()), name), true
}

// Removed returns obj's finalizers without name, and false (and nil) when
// obj does not have it.
func Removed(obj metav1.Object, name string) ([]string, bool) {
	if !Has(obj, name) {
		return nil, false
	}
	return slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == name }), true
}

// Patch returns the JSON merge patch that makes finalizers obj's
// finalizers, with obj's UID and resourceVersion as preconditions.
func Patch(obj metav1.Object, finalizers []string) ([]byte, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      finalizers,
		"uid":             obj.GetUID(),
		"resourceVersion": obj.GetResourceVersion(),
	}})
}

func set(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, finalizers []string) (*unstructured.Unstructured, error) {
	patch, err := Patch(obj, finalizers)
	if err != nil {
		return nil, err
	}
	patched, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("setting finalizers %v: %w", finalizers, err)
	}
	return patched, nil
}

// RemainingError reports that objects of Resource may still carry
// Finalizer: removing it from them failed with Err.
type RemainingError struct {
	Resource  schema.GroupVersionResource
	Finalizer string
	Err       error
}

func (e *RemainingError) Error() string {
	return fmt.Sprintf("removing finalizer %s from %s: %v", e.Finalizer, e.Resource.GroupResource(), e.Err)
}

func (e *RemainingError) Unwrap() error { return e.Err }

// Remaining returns every *RemainingError in err's tree (errors.Join
// included), in order.
func Remaining(err error) []*RemainingError {
	var out []*RemainingError
	var walk func(error)
	walk = func(err error) {
		if r, ok := err.(*RemainingError); ok {
			out = append(out, r)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// RemoveFromAll removes the finalizer name from every object of resource
// (in every namespace) that carries it, reading them uncached page by page
// and retrying objects that change meanwhile. A resource the server does
// not serve (any longer) has no objects, so none carries the finalizer:
// that is success. Any other failure is a *RemainingError.
func RemoveFromAll(ctx context.Context, client dynamic.Interface, resource schema.GroupVersionResource, name string) error {
	var errs []error
	rc := client.Resource(resource)
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := rc.List(ctx, opts)
		if apierrors.IsNotFound(err) {
			// Gone, perhaps between two pages: nothing is left to hold it.
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("listing: %w", err))
			break
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if !Has(obj, name) {
				continue
			}
			ri := rc.Namespace(obj.GetNamespace())
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				_, err := Remove(ctx, ri, obj, name)
				if apierrors.IsConflict(err) {
					fresh, getErr := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
					if getErr != nil {
						return getErr
					}
					obj = fresh
				}
				return err
			})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("%s: %w", cache.MetaObjectToName(obj), err))
			}
		}
		if list.GetContinue() == "" {
			break
		}
		opts.Continue = list.GetContinue()
	}
	if len(errs) == 0 {
		return nil
	}
	return &RemainingError{Resource: resource, Finalizer: name, Err: errors.Join(errs...)}
}
