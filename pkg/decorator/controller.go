package decorator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/controller"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/echo"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/metrics"
	"github.com/metactl/metactl/pkg/rbac"
	"github.com/metactl/metactl/pkg/related"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// AttachmentAnnotation marks the attachments of a DecoratorController, so
// that decorators sharing an object tell their attachments apart.
const AttachmentAnnotation = "metacontroller.k8s.io/decorator-controller"

// finalizerPrefix starts the finalizer of every DecoratorController.
const finalizerPrefix = "metacontroller.io/decoratorcontroller-"

// Options are what a Controller needs from the process around it.
type Options = controller.Options

// InvalidSpecError reports a controller object whose spec is invalid.
type InvalidSpecError = controller.InvalidSpecError

// Controller runs one DecoratorController.
type Controller struct {
	name string
	// object is the DecoratorController as the user wrote it; hooks get it.
	object *unstructured.Unstructured
	dc     *v1alpha1.DecoratorController
	opts   Options

	watched     []*watchedResource
	attachments *children.Declared
	finalizer   string
	writer      *children.Writer
	echoes      *echo.Echoes
	loop        *loop.Loop
	// hooks calls the hooks and remembers whether they last failed for
	// their credentials.
	hooks *controller.HookCaller
	// watches holds the informers of the watched resources and of the
	// attachments.
	watches *controller.Watches
	// related serves the customize hook; nil without one.
	related *related.Resolver
	// unsettled reports objects whose hook did not reach a fixed point.
	unsettled *controller.Unsettled
	// failing holds the objects whose last sync failed.
	failing *controller.Failing
	// answers reports unknown keys in answers and refuses those without
	// attachments (see controller.AbsentAttachmentsAnnotation).
	answers *controller.Answers

	stop     chan struct{}
	stopOnce sync.Once
	resync   sync.WaitGroup
}

// watchedResource is one decorated resource and the rules selecting its
// objects; an object is selected when any rule matches it.
type watchedResource struct {
	*discovery.Resource
	rules    []selector
	informer *informer.Informer
	// ignoreStatus is true when every rule of the resource ignores
	// status-only changes, this controller's own status writes included.
	ignoreStatus bool
}

// selector is one resource rule's label and annotation selectors; both must
// match.
type selector struct {
	labels      labels.Selector
	annotations v1alpha1.AnnotationSelector
}

func (w *watchedResource) selects(obj metav1.Object) bool {
	for _, r := range w.rules {
		if r.labels.Matches(labels.Set(obj.GetLabels())) && matchAnnotations(r.annotations, obj.GetAnnotations()) {
			return true
		}
	}
	return false
}

// New validates the DecoratorController object and resolves its resources.
// It returns an *InvalidSpecError for an invalid spec and an error
// satisfying discovery.IsNotFound for a resource the server does not serve.
func New(ctx context.Context, object *unstructured.Unstructured, opts Options) (*Controller, error) {
	dc := &v1alpha1.DecoratorController{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(object.Object, dc); err != nil {
		return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}}
	}
	errs := v1alpha1.ValidateDecoratorController(dc)
	errs = append(errs, controller.ValidateAbsentListAnnotation(object.GetAnnotations(), controller.AbsentAttachmentsAnnotation)...)
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errs: errs}
	}
	v1alpha1.SetDefaults_DecoratorController(dc)
	c := &Controller{
		name:      dc.Name,
		object:    object.DeepCopy(),
		dc:        dc,
		opts:      opts,
		writer:    &children.Writer{Objects: opts.Objects, Controller: dc.Name, Recorder: opts.Recorder, Noun: "attachment"},
		echoes:    echo.New(),
		hooks:     &controller.HookCaller{Hooks: opts.Hooks, Controller: dc.Name, OnHealthChange: opts.OnHealthChange},
		unsettled: &controller.Unsettled{Controller: dc.Name, Kind: "decoratorcontroller", Recorder: opts.Recorder},
		failing:   &controller.Failing{},
		stop:      make(chan struct{}),
	}
	c.failing.Describe = c.describeKey
	c.answers = &controller.Answers{
		Kind: "decoratorcontroller", Resource: "DecoratorController", Controller: dc.Name,
		List: "attachments", Annotation: controller.AbsentAttachmentsAnnotation,
		Object: c.object, Recorder: opts.Recorder,
		Current: func(ctx context.Context) (*unstructured.Unstructured, error) {
			metrics.UncachedReads.WithLabelValues(dc.Name, "annotation").Inc()
			return opts.Client.Resource(v1alpha1.DecoratorControllerResource).Get(ctx, dc.Name, metav1.GetOptions{})
		},
	}
	if dc.Spec.Hooks.Finalize != nil {
		c.finalizer = finalizerPrefix + dc.Name
	}
	byResource := map[string]*watchedResource{}
	for i, rule := range dc.Spec.Resources {
		path := field.NewPath("spec", "resources").Index(i)
		res, err := opts.Resources.Get(ctx, rule.APIVersion, rule.Resource)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		sel, err := newSelector(rule)
		if err != nil {
			return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(path, rule.Resource, err.Error())}}
		}
		key := res.APIVersion + "/" + res.Name
		w := byResource[key]
		if w == nil {
			w = &watchedResource{Resource: res, ignoreStatus: true}
			byResource[key] = w
			c.watched = append(c.watched, w)
		}
		w.rules = append(w.rules, sel)
		w.ignoreStatus = w.ignoreStatus && rule.IgnoreStatusChanges != nil && *rule.IgnoreStatusChanges
	}
	var declared []*children.Resource
	for i, rule := range dc.Spec.Attachments {
		res, err := opts.Resources.Get(ctx, rule.APIVersion, rule.Resource)
		if err != nil {
			return nil, fmt.Errorf("spec.attachments[%d]: %w", i, err)
		}
		declared = append(declared, &children.Resource{Resource: res, Method: rule.UpdateStrategy.Method})
	}
	c.attachments = children.NewDeclared(declared)
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
func matchAnnotations(sel v1alpha1.AnnotationSelector, annotations map[string]string) bool {
	for k, v := range sel.MatchAnnotations {
		if got, ok := annotations[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range sel.MatchExpressions {
		got, ok := annotations[e.Key]
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

// HookCredentialError returns the error of the last hook call when it
// failed for the hook's credentials (a missing Secret, a malformed CA
// bundle, ...), else nil.
func (c *Controller) HookCredentialError() error { return c.hooks.CredentialError() }

// Failing returns the set of objects whose last sync failed.
func (c *Controller) Failing() *controller.Failing { return c.failing }

// Access lists what the controller must be allowed to do: read and update
// decorated objects (and their status), and manage attachments.
func (c *Controller) Access() []rbac.Access {
	var access []rbac.Access
	for _, w := range c.watched {
		access = append(access, rbac.Access{Resource: w.Resource, Verbs: rbac.OwnerVerbs})
		if w.HasStatus {
			access = append(access, rbac.Access{Resource: w.Resource, Subresource: "status", Verbs: rbac.StatusVerbs})
		}
	}
	for _, a := range c.attachments.Resources {
		access = append(access, rbac.Access{Resource: a.Resource, Verbs: rbac.ChildVerbs})
	}
	return access
}

// Name returns the DecoratorController's name.
func (c *Controller) Name() string { return c.name }

// Start starts the informers and workers and returns once the caches are
// synced, or with ctx's error.
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("decoratorcontroller", c.name)
	c.loop = loop.New(loop.Options{Name: c.name, Workers: c.opts.Workers, RateLimiter: c.opts.RateLimiter}, c.failing.Track(c.sync))
	c.watches = controller.NewWatches(c.opts.Informers)
	var err error
	for i, w := range c.watched {
		if w.informer, err = c.watches.Watch(w.GroupVersionResource(), c.objectHandler(i, w)); err != nil {
			return err
		}
	}
	for _, res := range c.attachments.Resources {
		if res.Informer, err = c.watches.Watch(res.GroupVersionResource(), c.attachmentHandler()); err != nil {
			return err
		}
	}
	if !c.watches.WaitForSync(ctx) {
		return fmt.Errorf("waiting for caches of decoratorcontroller %s: %w", c.name, ctx.Err())
	}
	if hook := c.dc.Spec.Hooks.Customize; hook != nil {
		c.related = related.New(related.Options{
			Controller: c.name, Object: c.object, Customize: hook, Version: *c.dc.Spec.Hooks.Sync.Version,
			Hooks: c.opts.Hooks, Resources: c.opts.Resources, Informers: c.opts.Informers, Enqueue: c.loop.Add,
		})
	}
	c.loop.Start(klog.NewContext(ctx, logger))
	if p := c.dc.Spec.ResyncPeriodSeconds; p != nil {
		c.resync.Add(1)
		go func() {
			defer c.resync.Done()
			wait.Until(c.enqueueAll, time.Duration(*p)*time.Second, c.stop)
		}()
	}
	logger.Info("Started decoratorcontroller", "resources", len(c.watched), "attachments", len(c.attachments.Resources))
	return nil
}

// Stop stops taking work, waits for in-flight syncs and releases the
// informers. It is idempotent.
func (c *Controller) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.resync.Wait()
		if c.loop != nil {
			c.loop.Stop()
		}
		if c.related != nil {
			c.related.Close()
		}
		if c.watches != nil {
			c.watches.Release()
		}
	})
}

// Cleanup stops the controller's syncs and removes its finalizer from every
// object that carries it; for a deleted DecoratorController, whose objects
// would otherwise wait for a finalize hook that is never called again. It
// reads the objects uncached, so that none that got the finalizer a moment
// ago is missed. A resource the server no longer serves has no objects left
// to clean. Other failures are *finalizer.RemainingError, one per resource.
// Call Stop afterwards.
func (c *Controller) Cleanup(ctx context.Context) error {
	if c.loop != nil {
		c.loop.Stop()
	}
	var errs []error
	for _, w := range c.watched {
		metrics.UncachedReads.WithLabelValues(c.name, "cleanup").Inc()
		errs = append(errs, finalizer.RemoveFromAll(ctx, c.opts.Client, w.GroupVersionResource(), finalizerPrefix+c.name))
	}
	return errors.Join(errs...)
}

func (c *Controller) enqueueAll() {
	for i, w := range c.watched {
		for _, obj := range w.informer.ListMeta("", nil) {
			c.loop.Add(objectKey(i, obj))
		}
	}
}

// objectKey names a decorated object in the queue: the index of its
// watched resource, then namespace/name.
func objectKey(resource int, obj metav1.Object) string {
	return fmt.Sprintf("%d|%s", resource, children.Key(obj))
}

// describeKey names the object queued as key by its resource and
// namespace/name ("configmaps default/a"), for the controller's status.
func (c *Controller) describeKey(key string) string {
	index, _, _, err := splitKey(key)
	if err != nil || index >= len(c.watched) {
		return key
	}
	_, rest, _ := strings.Cut(key, "|")
	return c.watched[index].Name + " " + rest
}

func splitKey(key string) (resource int, namespace, name string, err error) {
	idx, rest, ok := strings.Cut(key, "|")
	if !ok {
		return 0, "", "", fmt.Errorf("bad key %q", key)
	}
	if _, err := fmt.Sscanf(idx, "%d", &resource); err != nil {
		return 0, "", "", fmt.Errorf("bad key %q", key)
	}
	namespace, name, err = cache.SplitMetaNamespaceKey(rest)
	return resource, namespace, name, err
}
