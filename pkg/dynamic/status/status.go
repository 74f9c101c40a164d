// Package status replaces the status of objects of any resource.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/metactl/metactl/pkg/dynamic/apply"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// PatchFunc patches the object name (or its subresources) and returns it
// as written. DynamicPatch adapts a dynamic client's Patch to it; an
// objectclient.Client's Patch fits it in a closure that supplies the
// resource and namespace.
type PatchFunc func(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error)

// DynamicPatch adapts client's Patch; what it returns is an
// *unstructured.Unstructured.
func DynamicPatch(client dynamic.ResourceInterface) PatchFunc {
	return func(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
		patched, err := client.Patch(ctx, name, pt, data, metav1.PatchOptions{}, subresources...)
		if err != nil {
			return nil, err
		}
		return patched, nil
	}
}

// Replace makes want the whole status of obj, unless obj already has it
// (compared semantically), in which case it writes nothing and returns
// (nil, nil). The write is a JSON patch, through the status subresource when
// hasSubresource, with obj's UID as precondition: an object deleted and
// re-created under the same name meanwhile is not written, and the error is
// a conflict. An object already gone returns (nil, nil).
func Replace(ctx context.Context, patch PatchFunc, resource schema.GroupResource, obj *unstructured.Unstructured, want map[string]any, hasSubresource bool) (metav1.Object, error) {
	have, _ := obj.Object["status"].(map[string]any)
	if Equal(have, want) {
		return nil, nil
	}
	data, err := json.Marshal([]map[string]any{
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
	patched, err := patch(ctx, obj.GetName(), types.JSONPatchType, data, subresources...)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsInvalid(err) && failedPatchTest(err):
		return nil, apierrors.NewConflict(resource, obj.GetName(), fmt.Errorf("the object was replaced: %w", err))
	case err != nil:
		return nil, fmt.Errorf("writing status: %w", err)
	}
	return patched, nil
}

// Equal reports whether two statuses are the same: as JSON values, numbers
// compared by value whatever their Go type (a hook's 1.0 is the API
// server's 1), and no status the same as an empty one.
func Equal(have, want map[string]any) bool {
	if len(have) == 0 && len(want) == 0 {
		return true
	}
	return apply.Equal(have, want)
}

// failedPatchTest reports whether an Invalid error is the failure of the
// patch's test of the UID: the server answers it without causes, where a
// status its schema refuses comes with a cause per field.
func failedPatchTest(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details == nil || len(details.Causes) == 0
}
