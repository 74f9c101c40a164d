package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/history"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
)

// StatusAnnotation holds, on an object of a built-in resource (a
// Namespace, ConfigMap, Service, Deployment, ...), the status its hook
// answers, as JSON: the object's own .status belongs to Kubernetes (a
// Deployment's replica counts) or does not exist (a ConfigMap), and its
// schema would drop or refuse the hook's fields. The hook is given it
// back as the object's .status (see statusView). Objects of a
// CustomResourceDefinition keep the hook's status in .status.
const StatusAnnotation = "metactl.io/status"

// MaxStatusAnnotationBytes bounds the StatusAnnotation's value (the
// status as JSON): a larger status is not written, and the sync fails
// with a *StatusTooLargeError (a SyncError Event, the log, a retry). The
// API server allows 256 KiB for all of an object's annotations together.
const MaxStatusAnnotationBytes = 64 << 10

// StatusTooLargeError reports a status the hook answered for an object
// whose status is kept in StatusAnnotation that exceeds
// MaxStatusAnnotationBytes as JSON. The annotation keeps the status it had.
type StatusTooLargeError struct {
	Size, Max int
}

func (e *StatusTooLargeError) Error() string {
	return fmt.Sprintf("the status the hook answered is %d bytes as JSON, more than the %d bytes the %s annotation holds; the object keeps its previous status",
		e.Size, e.Max, StatusAnnotation)
}

// StatusInAnnotation reports whether the objects of res keep their hook's
// status in StatusAnnotation: those of a built-in resource, one whose
// kind client-go's scheme knows (a CRD's kinds are not in it).
func StatusInAnnotation(res *Synced) bool {
	return res != nil && res.Resource != nil && scheme.Scheme.Recognizes(res.GroupVersionKind())
}

// statusView returns obj as its hook sees it when its status is kept in
// StatusAnnotation: a shallow copy (obj is not changed) whose .status is
// the annotation's, none without one. An annotation that is not a JSON
// object counts as no status (the next status write replaces it); the
// error says so.
func statusView(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	delete(out.Object, "status")
	raw, ok := obj.GetAnnotations()[StatusAnnotation]
	if !ok {
		return out, nil
	}
	var st map[string]any
	if err := utiljson.Unmarshal([]byte(raw), &st); err != nil {
		return out, fmt.Errorf("the %s annotation is not a JSON object, taken as no status: %w", StatusAnnotation, err)
	}
	if st != nil {
		out.Object["status"] = st
	}
	return out, nil
}

// writeStatusAnnotation is writeStatus for an object whose status is kept
// in StatusAnnotation (t.Object is its statusView): want goes into the
// annotation, unless the object has it already, in a merge patch with the
// object's UID as precondition; its real .status is not touched. A status
// too large is refused (*StatusTooLargeError, an invalid answer), the
// annotation left as it was.
func (e *Engine) writeStatusAnnotation(ctx context.Context, t *Target, want map[string]any, seen bool) error {
	obj := t.Object
	have, _ := obj.Object["status"].(map[string]any)
	if status.Equal(have, want) {
		return nil
	}
	data, err := json.Marshal(want)
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	if len(data) > MaxStatusAnnotationBytes {
		err := &StatusTooLargeError{Size: len(data), Max: MaxStatusAnnotationBytes}
		history.Failed(ctx, "patch", "status", t.Name(), err)
		return InvalidAnswer(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         obj.GetUID(), // precondition: the same object
		"annotations": map[string]any{StatusAnnotation: string(data)},
	}})
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	written, err := e.objects.Patch(ctx, t.Resource.GroupVersionResource(), obj.GetNamespace(), obj.GetName(), types.MergePatchType, patch)
	if apierrors.IsNotFound(err) {
		return nil // gone: nothing to write
	}
	if err != nil {
		history.Failed(ctx, "patch", "status", t.Name(), err)
		return WriteFailed(fmt.Errorf("writing the status to the %s annotation: %w", StatusAnnotation, err))
	}
	history.Wrote(ctx, e.name, "patch", "status", t.Name(), nil)
	if seen {
		e.echoes.Expect(written)
	}
	t.Object = withMetadata(obj, written)
	t.Object.Object["status"] = want
	klog.FromContext(ctx).V(4).Info("Updated status", "annotation", StatusAnnotation)
	return nil
}
