package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/hookrecord"
)

// RecordAnnotation on a CompositeController or DecoratorController turns
// the recording of its hook calls (internal/hookrecord) on ("true") or off
// ("false"), whatever Options.RecordAll says.
const RecordAnnotation = hookrecord.Annotation

// validateRecordAnnotation checks the value of RecordAnnotation on a
// controller object: absent, "true" or "false".
func validateRecordAnnotation(annotations map[string]string) field.ErrorList {
	v, ok := annotations[RecordAnnotation]
	if !ok || v == "true" || v == "false" {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(RecordAnnotation), v, []string{"true", "false"})}
}

// recordingEnabled says whether a controller object records its hook
// calls: its annotation, else the default (Options.RecordAll); never
// without a Recorder.
func recordingEnabled(obj *unstructured.Unstructured, opts Options) bool {
	if opts.Record == nil {
		return false
	}
	if v, ok := obj.GetAnnotations()[RecordAnnotation]; ok {
		return v == "true"
	}
	return opts.RecordAll
}

// withRecording marks the hook calls of a sync of t's object under ctx as
// the controller's, to be recorded, when it records; ctx as it is
// otherwise. The object is named "namespace/name" (or "name", as
// klog.KObj writes it: trigger.ObjectName would put the resource first), and
// for a decorator, which syncs objects of several resources, with its resource
// first (Target.Name).
func (e *Engine) withRecording(ctx context.Context, t *Target) context.Context {
	if !e.recording {
		return ctx
	}
	object := klog.KObj(t.Object).String()
	if e.kindName == "decoratorcontroller" {
		object = t.Name()
	}
	return hookrecord.With(ctx, e.historyID(), object)
}
