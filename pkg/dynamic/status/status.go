// Package status replaces the status of objects of any resource.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/pkg/dynamic/apply"
)

// PatchFunc patches the object name (or its subresources) and returns it
// as written: a client's Patch for one resource and namespace, such as
// the engine's object client (internal/engine).
type PatchFunc func(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error)

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
	return write(ctx, patch, resource, obj, hasSubresource, map[string]any{"op": "add", "path": "/status", "value": want})
}

// PatchConditions makes want, a status that differs from obj's only in its
// conditions, obj's status by writing its conditions alone, unless obj
// already has them (compared semantically): (nil, nil) then. Nothing
// else of the status is touched, and the conditions obj has (or its
// status, when it has none) are a precondition besides its UID, so that
// conditions another writer changed meanwhile are not overwritten: the
// error is a conflict then, as it is for a replaced object (see Replace,
// whose other rules it follows). A status of obj that is not an object is
// left alone: (nil, nil).
func PatchConditions(ctx context.Context, patch PatchFunc, resource schema.GroupResource, obj *unstructured.Unstructured, want map[string]any, hasSubresource bool) (metav1.Object, error) {
	var ops []map[string]any
	switch have := obj.Object["status"].(type) {
	case nil:
		ops = []map[string]any{
			{"op": "test", "path": "/status", "value": nil},
			{"op": "add", "path": "/status", "value": map[string]any{"conditions": want["conditions"]}},
		}
	case map[string]any:
		if Equal(map[string]any{"conditions": have["conditions"]}, map[string]any{"conditions": want["conditions"]}) {
			return nil, nil
		}
		ops = []map[string]any{
			{"op": "test", "path": "/status/conditions", "value": have["conditions"]},
			{"op": "add", "path": "/status/conditions", "value": want["conditions"]},
		}
	default:
		return nil, nil
	}
	return write(ctx, patch, resource, obj, hasSubresource, ops...)
}

// write applies ops to obj in a JSON patch, after a test of its UID,
// through the status subresource when hasSubresource. An object gone
// returns (nil, nil); a failed test (the object was replaced, or a
// precondition of ops no longer holds), a conflict.
func write(ctx context.Context, patch PatchFunc, resource schema.GroupResource, obj *unstructured.Unstructured, hasSubresource bool, ops ...map[string]any) (metav1.Object, error) {
	data, err := json.Marshal(append([]map[string]any{{"op": "test", "path": "/metadata/uid", "value": obj.GetUID()}}, ops...))
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
		return nil, apierrors.NewConflict(resource, obj.GetName(), fmt.Errorf("the object was replaced or changed: %w", err))
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

// failedPatchTest reports whether an Invalid error is the failure of one of
// the patch's tests (of the UID, say): the server answers it without causes, where a
// status its schema refuses comes with a cause per field.
func failedPatchTest(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details == nil || len(details.Causes) == 0
}
