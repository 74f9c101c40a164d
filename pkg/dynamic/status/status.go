// Package status replaces the status of objects of any resource.
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Replace makes want the whole status of obj, unless obj already has it
// (compared semantically), in which case it writes nothing and returns
// (nil, nil). The write is a JSON patch, through the status subresource when
// hasSubresource, with obj's UID as precondition: an object deleted and
// re-created under the same name meanwhile is not written, and the error is
// a conflict. An object already gone returns (nil, nil).
func Replace(ctx context.Context, client dynamic.ResourceInterface, resource schema.GroupResource, obj *unstructured.Unstructured, want map[string]any, hasSubresource bool) (*unstructured.Unstructured, error) {
	have, _ := obj.Object["status"].(map[string]any)
	if equality.Semantic.DeepEqual(have, want) {
		return nil, nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": obj.GetUID()},
		{"op": "add", "path": "/status", "value": want},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	var subresources []string
	if hasSubresource {
		subresources = []string{"status"}
	}
	patched, err := client.Patch(ctx, obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{}, subresources...)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsInvalid(err) && strings.Contains(err.Error(), "test"):
		return nil, apierrors.NewConflict(resource, obj.GetName(), fmt.Errorf("the object was replaced: %w", err))
	case err != nil:
		return nil, fmt.Errorf("writing status: %w", err)
	}
	return patched, nil
}
