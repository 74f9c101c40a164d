package engine

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/pkg/hooks"
)

// The annotations by which a controller object chooses how an answer of
// its sync hook without the list of children (CompositeController) or
// attachments (DecoratorController) is read, and their values.
//
// By default (no annotation, or AbsentListRefuse) such an answer is
// refused while the object has some, so that a misspelt key ("childern")
// never deletes them all: a hook that means "delete them all" answers an
// empty list. AbsentListEmpty restores metacontroller's reading, where a
// missing list is an empty one.
const (
	AbsentChildrenAnnotation    = "metactl.io/absent-children"
	AbsentAttachmentsAnnotation = "metactl.io/absent-attachments"

	AbsentListRefuse = "refuse"
	AbsentListEmpty  = "empty"
)

// validateAbsentListAnnotation checks the value of annotation on a
// controller object: absent, AbsentListRefuse or AbsentListEmpty.
func validateAbsentListAnnotation(annotations map[string]string, annotation string) field.ErrorList {
	v, ok := annotations[annotation]
	if !ok || v == AbsentListRefuse || v == AbsentListEmpty {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(annotation), v, []string{AbsentListRefuse, AbsentListEmpty})}
}

// Answers checks and reports, for one controller, what the answers of its
// sync hook leave unsaid: unknown top-level keys, which loose decoding
// ignores, and a missing list of children or attachments. Safe for
// concurrent use.
type Answers struct {
	// Kind names the controller's kind in Events ("compositecontroller",
	// "decoratorcontroller"); Resource is its kind as users write it
	// ("CompositeController").
	Kind, Resource string
	// Controller is the controller's name.
	Controller string
	// List is the answer's list ("children", "attachments") and
	// Annotation the annotation that chooses how its absence is read.
	List, Annotation string
	// Object is the controller object as the controller was started with.
	Object *unstructured.Unstructured
	// Current, when set, reads the controller object as it is now, so
	// that an annotation added since the start counts; when it fails,
	// Object is used.
	Current func(ctx context.Context) (*unstructured.Unstructured, error)
	// Recorder records the Events.
	Recorder record.EventRecorder

	mu     sync.Mutex
	logged map[string]bool // sets of unknown keys logged at level 0
}

// reportUnknown reports the unknown top-level keys of an answer of the
// hook named hook to obj: a Warning Event (reason UnknownAnswerField; the
// recorder aggregates repeats) and a log line, at level 0 the first time
// this controller meets these keys, then at level 4. It does nothing
// without unknown keys.
func (a *Answers) reportUnknown(ctx context.Context, obj runtime.Object, hook string, unknown []hooks.UnknownField) {
	if len(unknown) == 0 {
		return
	}
	keys := make([]string, len(unknown))
	for i, f := range unknown {
		keys[i] = f.String()
	}
	list := strings.Join(keys, ", ")
	noun := "key"
	if len(unknown) > 1 {
		noun = "keys"
	}
	a.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonUnknownAnswerField,
		"%s %s: the %s hook answered with unknown %s %s, which metactl ignores; the keys metactl knows are %s",
		a.Kind, a.Controller, hook, noun, list, a.knownKeys())

	a.mu.Lock()
	first := !a.logged[list]
	if first {
		if a.logged == nil {
			a.logged = map[string]bool{}
		}
		if len(a.logged) < 100 {
			a.logged[list] = true
		}
	}
	a.mu.Unlock()
	logger := klog.FromContext(ctx)
	if !first {
		logger = logger.V(4)
	}
	logger.Info("Hook answer has unknown keys, ignored", "hook", hook, "keys", list)
}

// knownKeys lists the top-level keys of the controller's answers.
func (a *Answers) knownKeys() string {
	if a.List == "attachments" {
		return `"labels", "annotations", "status", "attachments", "resyncAfterSeconds", "finalized", "events"`
	}
	return `"status", "children", "resyncAfterSeconds", "finalized", "events"`
}

// CheckList returns a *refusedAnswerError when an answer of the hook named
// hook has no list (absent) while the object has observed children
// (attachments), or while an unknown key of the answer likely misspells
// the list ("childern": on a new parent too, where it would otherwise
// leave the parent without its children and only a Warning Event to say
// why), and the controller does not read a missing list as an empty one;
// else nil. unknown are the answer's unknown keys.
func (a *Answers) CheckList(ctx context.Context, hook string, absent bool, observed int, unknown []hooks.UnknownField) error {
	if !absent || observed == 0 && !a.misspelt(unknown) {
		return nil
	}
	value, ok := a.annotation(ctx)
	if ok && value == AbsentListEmpty {
		return nil
	}
	err := &refusedAnswerError{Hook: hook, List: a.List, Resource: a.Resource, Annotation: a.Annotation, Observed: observed, Unknown: unknown}
	if ok && value != AbsentListRefuse {
		err.Invalid = &value
	}
	return err
}

// misspelt reports whether one of the unknown keys likely misspells the
// list.
func (a *Answers) misspelt(unknown []hooks.UnknownField) bool {
	for _, f := range unknown {
		if f.Suggestion == a.List {
			return true
		}
	}
	return false
}

// annotation returns the controller object's annotation, as it is now
// when Current can tell.
func (a *Answers) annotation(ctx context.Context) (string, bool) {
	obj := a.Object
	if a.Current != nil {
		if current, err := a.Current(ctx); err == nil {
			obj = current
		} else {
			klog.FromContext(ctx).V(4).Info("Reading the controller object failed; using the one it was started with", "err", err)
		}
	}
	if obj == nil {
		return "", false
	}
	v, ok := obj.GetAnnotations()[a.Annotation]
	return v, ok
}

// Count returns how many objects the sets of observed hold.
func Count[R comparable, S ~map[string]*unstructured.Unstructured](observed map[R]S) int {
	n := 0
	for _, set := range observed {
		n += len(set)
	}
	return n
}
