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
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Has reports whether obj carries the finalizer name.
func Has(obj metav1.Object, name string) bool {
	return slices.Contains(obj.GetFinalizers(), name)
}

// Add adds name to obj's finalizers, unless it has it, and returns the
// object as written (or obj unchanged).
func Add(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, name string) (*unstructured.Unstructured, error) {
	if Has(obj, name) {
		return obj, nil
	}
	return set(ctx, client, obj, append(slices.Clone(obj.GetFinalizers()), name))
}

// Remove removes name from obj's finalizers, if it has it, and returns the
// object as written (or obj unchanged).
func Remove(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, name string) (*unstructured.Unstructured, error) {
	if !Has(obj, name) {
		return obj, nil
	}
	return set(ctx, client, obj, slices.DeleteFunc(slices.Clone(obj.GetFinalizers()), func(f string) bool { return f == name }))
}

func set(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, finalizers []string) (*unstructured.Unstructured, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers":      finalizers,
		"uid":             obj.GetUID(),
		"resourceVersion": obj.GetResourceVersion(),
	}})
	if err != nil {
		return nil, err
	}
	patched, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("setting finalizers %v: %w", finalizers, err)
	}
	return patched, nil
}
