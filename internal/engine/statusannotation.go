package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/pkg/dynamic/status"
)

// StatusAnnotation holds, on an object of a built-in resource (a
// Namespace, ConfigMap, Service, Deployment, ...), the status its hook
// answers, as JSON: the object's own .status belongs to Kubernetes (a
// Deployment's replica counts) or does not exist (a ConfigMap), and its
// schema would drop or refuse the hook's fields. The sync reads and
// writes it as the object's status (see statusView), and the hook is
// given it back as .status, unless the hook is given the real status
// (Watched.RealStatus: a decorator's). Objects of a
// CustomResourceDefinition keep the hook's status in .status.
const StatusAnnotation = "metactl.io/status"

// MaxStatusAnnotationBytes bounds the StatusAnnotation's value (the
// status as JSON): a larger status is not written, and the sync fails
// with a *statusTooLargeError (a SyncError Event, the log, a retry). The
// API server allows 256 KiB for all of an object's annotations together.
const MaxStatusAnnotationBytes = 64 << 10

// StatusInAnnotation reports whether the objects of res keep their hook's
// status in StatusAnnotation: those of a built-in resource, one whose
// kind client-go's scheme knows (a CRD's kinds are not in it).
func StatusInAnnotation(res *Watched) bool {
	return res != nil && res.Resource != nil && scheme.Scheme.Recognizes(res.GroupVersionKind())
}

// statusView returns obj as its hook sees it when its status is kept in
// StatusAnnotation: a shallow copy (obj is not changed) whose .status is
// the annotation's, none without one. An annotation that is not a JSON
// object counts as no status (the next status write replaces it); the
// error says so.
func statusView(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out := WithStatus(obj, nil)
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
// annotation, unless the object has it already (a decorated object without
// the annotation: unless its own .status is want, see prepareTarget), in a merge patch with the
// object's UID as precondition; its real .status is not touched. A status
// too large is refused (*statusTooLargeError, an invalid answer), the
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
		err := &statusTooLargeError{Size: len(data), Max: MaxStatusAnnotationBytes}
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
		e.echoes.Expect(t.Key, written)
	}
	t.Object = withMetadata(obj, written)
	t.Object.Object["status"] = want
	klog.FromContext(ctx).V(4).Info("Updated status", "annotation", StatusAnnotation)
	return nil
}

// maxPrunedShown bounds the fields a StatusPruned Event names.
const maxPrunedShown = 10

// warnPruned tells, once per resource, of the fields of want, the status a
// hook answered, that the API server dropped from written, the object as
// the status write returned it: a custom resource whose status schema does
// not declare them. They are never given back to the hook, so its answer
// differs from what it is given on every sync. A Warning Event on the
// object and a log line name them and what to do. The conditions' filled
// fields (lastTransitionTime, observedGeneration) are not counted: metactl
// adds them only where the schema keeps them (status.Unkept).
func (e *Engine) warnPruned(ctx context.Context, t *Target, want map[string]any, written metav1.Object) {
	if _, warned := e.prunedWarned.Load(t.Resource); warned {
		return
	}
	kept, known := writtenStatus(written)
	if !known {
		return
	}
	var pruned []string
	prunedFields(want, kept, ".status", &pruned)
	if len(pruned) == 0 {
		return
	}
	if _, warned := e.prunedWarned.LoadOrStore(t.Resource, true); warned {
		return
	}
	shown := pruned
	if len(shown) > maxPrunedShown {
		shown = append(slices.Clone(shown[:maxPrunedShown]), "...")
	}
	msg := fmt.Sprintf("the API server dropped fields of the status the hook answered: %s; the status schema of %s does not declare them, "+
		"so the hook is never given them back and its status is written again on every sync: declare them, or mark .status "+
		"x-kubernetes-preserve-unknown-fields: true", strings.Join(shown, ", "), t.Resource.GroupVersionResource().GroupResource())
	klog.FromContext(ctx).Info("Status fields pruned by the schema", "fields", shown, "resource", t.Resource.GroupVersionResource())
	if e.opts.Recorder != nil {
		e.opts.Recorder.Event(t.Object, corev1.EventTypeWarning, ReasonStatusPruned, msg)
	}
}

// prunedFields appends to out the paths (under path) of the fields of want
// that kept lacks, descending into objects; a list counts as one field.
// The conditions are left out (see warnPruned).
func prunedFields(want, kept map[string]any, path string, out *[]string) {
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if path == ".status" && k == "conditions" {
			continue
		}
		v := want[k]
		if v == nil {
			continue
		}
		have, ok := kept[k]
		if !ok {
			*out = append(*out, path+"."+k)
			continue
		}
		if wm, ok := v.(map[string]any); ok {
			hm, _ := have.(map[string]any)
			prunedFields(wm, hm, path+"."+k, out)
		}
	}
}
