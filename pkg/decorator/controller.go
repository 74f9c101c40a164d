package decorator

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// AttachmentAnnotation marks the attachments of a DecoratorController, so
// that decorators sharing an object tell their attachments apart.
const AttachmentAnnotation = "metacontroller.k8s.io/decorator-controller"

// finalizerPrefix starts the finalizer of every DecoratorController.
const finalizerPrefix = "metacontroller.io/decoratorcontroller-"

// Options are what a Controller needs from the process around it.
type Options = engine.Options

// Controller runs one DecoratorController: its engine runs it, and
// Controller is the engine's engine.Controller. What runs it (the manager,
// metactl plan, tests) uses the engine's engine.Runner.
type Controller struct {
	engine.Runner
	// eng is the engine that runs the controller (and is its Runner).
	eng *engine.Engine

	name string
	// object is the DecoratorController as the user wrote it; hooks get it.
	object *unstructured.Unstructured
	dc     *v1alpha1.DecoratorController

	watched     []*watchedResource
	attachments *children.Declared
}

// watchedResource is one decorated resource and the rules selecting its
// objects; an object is selected when any rule matches it.
// Its IgnoreStatusChanges is true when every rule of the resource ignores
// status-only changes, this controller's own status writes included.
type watchedResource struct {
	*engine.Watched
	rules []selector
}

// selector is one resource rule's label and annotation selectors; both must
// match.
type selector struct {
	labels      labels.Selector
	annotations v1alpha1.AnnotationSelector
}

func (w *watchedResource) selects(obj metav1.Object) bool {
	for _, r := range w.rules {
		if r.labels.Matches(informer.LabelsOf(obj)) && matchAnnotations(r.annotations, informer.AnnotationsOf(obj)) {
			return true
		}
	}
	return false
}

// New validates the DecoratorController object and resolves its resources.
// It returns a *engine.InvalidSpecError for an invalid spec and an error
// satisfying discovery.IsNotFound for a resource the server does not serve.
func New(ctx context.Context, object *unstructured.Unstructured, opts Options) (*Controller, error) {
	dc := &v1alpha1.DecoratorController{}
	if err := engine.DecodeSpec(object, dc, v1alpha1.ValidateDecoratorController, engine.AbsentAttachmentsAnnotation); err != nil {
		return nil, err
	}
	v1alpha1.SetDefaults_DecoratorController(dc)
	c := &Controller{name: dc.Name, object: object.DeepCopy(), dc: dc}
	byResource := map[string]*watchedResource{}
	for i, rule := range dc.Spec.Resources {
		path := field.NewPath("spec", "resources").Index(i)
		res, err := opts.Resources.Get(ctx, rule.APIVersion, rule.Resource)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		sel, err := newSelector(rule)
		if err != nil {
			return nil, &engine.InvalidSpecError{Errs: field.ErrorList{field.Invalid(path, rule.Resource, err.Error())}}
		}
		key := res.APIVersion + "/" + res.Name
		w := byResource[key]
		if w == nil {
			w = &watchedResource{Watched: &engine.Watched{Resource: res, IgnoreStatusChanges: true, Noun: "object", RealStatus: true,
				KeyPrefix: strconv.Itoa(len(c.watched)) + "|"}}
			w.Selects = w.selects
			byResource[key] = w
			c.watched = append(c.watched, w)
		}
		w.rules = append(w.rules, sel)
		w.IgnoreStatusChanges = w.IgnoreStatusChanges && rule.IgnoreStatusChanges != nil && *rule.IgnoreStatusChanges
	}
	var declared []*children.Resource
	for i, rule := range dc.Spec.Attachments {
		res, err := opts.Resources.Get(ctx, rule.APIVersion, rule.Resource)
		if err != nil {
			return nil, fmt.Errorf("spec.attachments[%d]: %w", i, err)
		}
		if j := children.OtherVersion(declared, &children.Resource{Resource: res}); j >= 0 {
			return nil, &engine.InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "attachments").Index(i).Child("apiVersion"), rule.APIVersion,
				children.OtherVersionMessage("attachments", declared[j].APIVersion))}}
		}
		var earlier int
		declared, earlier = children.Declare(declared, &children.Resource{Resource: res, Method: rule.UpdateStrategy.Method})
		if earlier >= 0 {
			engine.ReportRepeated(ctx, opts.Recorder, c.object, "attachments", i, earlier, res, declared[earlier].Method)
		}
	}
	c.attachments = children.NewDeclared(declared)
	c.eng = engine.NewEngine(engine.Config{
		Kind: "DecoratorController", Resource: v1alpha1.DecoratorControllerResource, Object: c.object,
		Hooks: *dc.Spec.Hooks, Finalizer: finalizerPrefix + dc.Name,
		List: "attachments", Annotation: engine.AbsentAttachmentsAnnotation, Noun: "attachment",
		ResyncPeriodSeconds: dc.Spec.ResyncPeriodSeconds, Describe: describeKey,
		Log: []any{"resources", len(c.watched), "attachments", len(c.attachments.Resources)},
	}, opts, c)
	c.Runner = c.eng
	return c, nil
}

func newSelector(rule v1alpha1.DecoratorControllerResourceRule) (selector, error) {
	sel := selector{labels: labels.Everything()}
	if rule.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(rule.LabelSelector)
		if err != nil {
			return sel, fmt.Errorf("labelSelector: %w", err)
		}
		sel.labels = s
	}
	if as := rule.AnnotationSelector; as != nil {
		sel.annotations = *as
	}
	return sel, nil
}

// matchAnnotations reports whether annotations satisfy an annotation
// selector: every matchAnnotations entry and every expression. Values are
// compared as free text (annotation values need not be label values).
func matchAnnotations(sel v1alpha1.AnnotationSelector, annotations labels.Labels) bool {
	for k, v := range sel.MatchAnnotations {
		if got, ok := annotations.Lookup(k); !ok || got != v {
			return false
		}
	}
	for _, e := range sel.MatchExpressions {
		got, ok := annotations.Lookup(e.Key)
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if !ok || !slices.Contains(e.Values, got) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if ok && slices.Contains(e.Values, got) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !ok {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Watch acquires the informers of the watched resources and of the
// attachments (engine.Controller).
func (c *Controller) Watch(w *engine.Watches) error {
	var err error
	for _, res := range c.watched {
		concerns := func(obj metav1.Object) bool {
			return res.selects(obj) || finalizer.Has(obj, finalizerPrefix+c.name)
		}
		key := func(obj metav1.Object) engine.Key { return engine.KeyOf(res.Watched, obj) }
		if res.Informer, err = w.Watch(res.GroupVersionResource(), c.eng.ObjectHandler(key, concerns, res.IgnoreStatusChanges, nil)); err != nil {
			return err
		}
	}
	owners := engine.Owners{Keys: c.ownerKeys}
	for _, res := range c.attachments.Resources {
		owners.Resource = res.GroupVersionResource().GroupResource().String()
		if res.Informer, err = w.Watch(res.GroupVersionResource(), c.eng.DependentHandler(owners)); err != nil {
			return err
		}
	}
	return nil
}

// Keys returns the key of every object of the watched resources in the
// cache (engine.Controller).
func (c *Controller) Keys() []engine.Key {
	var keys []engine.Key
	for _, w := range c.watched {
		for _, obj := range w.Informer.ListMeta("", nil) {
			keys = append(keys, engine.KeyOf(w.Watched, obj))
		}
	}
	return keys
}

// Resources returns the watched resources (engine.Controller).
func (c *Controller) Resources() []*engine.Watched {
	out := make([]*engine.Watched, len(c.watched))
	for i, w := range c.watched {
		out[i] = w.Watched
	}
	return out
}

// KeyOf returns obj's watched resource and queue key
// (engine.Keyer).
func (c *Controller) KeyOf(obj *unstructured.Unstructured) (engine.Key, bool) {
	for _, w := range c.watched {
		if obj.GetAPIVersion() == w.APIVersion && obj.GetKind() == w.Kind {
			return engine.KeyOf(w.Watched, obj), true
		}
	}
	return engine.Key{}, false
}

// Dependents returns the attachment resources (engine.Controller).
func (c *Controller) Dependents() *children.Declared { return c.attachments }

// describeKey names the object queued as key by its resource and
// namespace/name ("configmaps default/a"), for the controller's status.
func describeKey(key engine.Key) string {
	return key.Resource.Name + " " + cache.ObjectName{Namespace: key.Namespace, Name: key.Name}.String()
}
