package composite

import (
	"context"
	"fmt"
	"slices"
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

// Options are what a Controller needs from the process around it.
type Options = controller.Options

// InvalidSpecError reports a controller object whose spec is invalid.
type InvalidSpecError = controller.InvalidSpecError

// Controller runs one CompositeController.
type Controller struct {
	name string
	// object is the CompositeController as the user wrote it; hooks receive it.
	object *unstructured.Unstructured
	// cc is the defaulted typed copy the controller reads.
	cc   *v1alpha1.CompositeController
	opts Options

	parent         *discovery.Resource
	parentSelector labels.Selector // nil: every parent
	children       *children.Declared
	finalizer      string
	writer         *children.Writer
	// echoes are this controller's own writes, whose watch events need no
	// sync: the sync that wrote them already acted on their result.
	echoes *echo.Echoes
	// selectors are the parents' child selectors, for orphans' events.
	selectors selectorCache
	// hooks calls the hooks and remembers whether they last failed for
	// their credentials.
	hooks *controller.HookCaller
	// related serves the customize hook; nil without one.
	related *related.Resolver
	// unsettled reports parents whose hook did not reach a fixed point.
	unsettled *controller.Unsettled
	// failing holds the parents whose last sync failed.
	failing *controller.Failing
	// answers reports unknown keys in answers and refuses those without
	// children (see controller.AbsentChildrenAnnotation).
	answers *controller.Answers

	// watches holds the informers below.
	watches        *controller.Watches
	parentInformer *informer.Informer
	// revisions watches ControllerRevisions, for parents with rolling
	// child resources; nil without any.
	revisions *informer.Informer
	loop      *loop.Loop

	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	resync   sync.WaitGroup
}

// New validates the CompositeController object and resolves its resources
// through discovery. It returns an *InvalidSpecError for an invalid spec and
// an error satisfying discovery.IsNotFound for a resource the server does
// not serve. The controller does nothing until Start.
func New(ctx context.Context, object *unstructured.Unstructured, opts Options) (*Controller, error) {
	cc := &v1alpha1.CompositeController{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(object.Object, cc); err != nil {
		return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}}
	}
	errs := v1alpha1.ValidateCompositeController(cc)
	errs = append(errs, controller.ValidateAbsentListAnnotation(object.GetAnnotations(), controller.AbsentChildrenAnnotation)...)
	if len(errs) > 0 {
		return nil, &InvalidSpecError{Errs: errs}
	}
	v1alpha1.SetDefaults_CompositeController(cc)
	if opts.Workers <= 0 {
		opts.Workers = 32
	}

	c := &Controller{
		name:      cc.Name,
		object:    object.DeepCopy(),
		cc:        cc,
		opts:      opts,
		writer:    &children.Writer{Objects: opts.Objects, Controller: cc.Name, Recorder: opts.Recorder},
		echoes:    echo.New(),
		hooks:     &controller.HookCaller{Hooks: opts.Hooks, Controller: cc.Name, OnHealthChange: opts.OnHealthChange},
		unsettled: &controller.Unsettled{Controller: cc.Name, Kind: "compositecontroller", Recorder: opts.Recorder},
		failing:   &controller.Failing{},
		stop:      make(chan struct{}),
	}
	c.answers = &controller.Answers{
		Kind: "compositecontroller", Resource: "CompositeController", Controller: cc.Name,
		List: "children", Annotation: controller.AbsentChildrenAnnotation,
		Object: c.object, Recorder: opts.Recorder,
		Current: func(ctx context.Context) (*unstructured.Unstructured, error) {
			metrics.UncachedReads.WithLabelValues(cc.Name, "annotation").Inc()
			return opts.Client.Resource(v1alpha1.CompositeControllerResource).Get(ctx, cc.Name, metav1.GetOptions{})
		},
	}
	if cc.Spec.Hooks.Finalize != nil {
		c.finalizer = finalizerPrefix + cc.Name
	}
	var err error
	pr := cc.Spec.ParentResource
	if c.parent, err = opts.Resources.Get(ctx, pr.APIVersion, pr.Resource); err != nil {
		return nil, fmt.Errorf("spec.parentResource: %w", err)
	}
	if pr.LabelSelector != nil {
		if c.parentSelector, err = metav1.LabelSelectorAsSelector(pr.LabelSelector); err != nil {
			return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "parentResource", "labelSelector"), "", err.Error())}}
		}
	}
	var declared []*children.Resource
	for i, rule := range cc.Spec.ChildResources {
		res, err := opts.Resources.Get(ctx, rule.APIVersion, rule.Resource)
		if err != nil {
			return nil, fmt.Errorf("spec.childResources[%d]: %w", i, err)
		}
		if c.parent.Namespaced && !res.Namespaced {
			return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "childResources").Index(i), rule.Resource,
				"a namespaced parent cannot own cluster-scoped children")}}
		}
		if !c.parent.Namespaced && rule.UpdateStrategy.Method.IsRolling() {
			// metacontroller accepts this, then fails every sync: it
			// cannot create a ControllerRevision without a namespace.
			return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "childResources").Index(i).Child("updateStrategy", "method"), string(rule.UpdateStrategy.Method),
				"rolling updates need a namespaced parent: their ControllerRevisions live in the parent's namespace; use Recreate or InPlace for the children of a cluster-scoped parent")}}
		}
		declared = append(declared, &children.Resource{Resource: res, Method: rule.UpdateStrategy.Method})
	}
	c.children = children.NewDeclared(declared)
	return c, nil
}

// HookCredentialError returns the error of the last hook call when it
// failed for the hook's credentials (a missing Secret, a malformed CA
// bundle, ...), else nil.
func (c *Controller) HookCredentialError() error { return c.hooks.CredentialError() }

// Failing returns the set of parents whose last sync failed.
func (c *Controller) Failing() *controller.Failing { return c.failing }

// rolling reports whether a child resource updates with a rolling method
// (New accepts these only for a namespaced parent).
func (c *Controller) rolling() bool {
	return slices.ContainsFunc(c.children.Resources, func(r *children.Resource) bool { return r.Method.IsRolling() })
}

// Access lists what the controller must be allowed to do: read and update
// parents (and their status), and manage children.
func (c *Controller) Access() []rbac.Access {
	access := []rbac.Access{{Resource: c.parent, Verbs: rbac.OwnerVerbs}}
	if c.parent.HasStatus {
		access = append(access, rbac.Access{Resource: c.parent, Subresource: "status", Verbs: rbac.StatusVerbs})
	}
	for _, child := range c.children.Resources {
		access = append(access, rbac.Access{Resource: child.Resource, Verbs: rbac.ChildVerbs})
	}
	return access
}

// Name returns the CompositeController's name.
func (c *Controller) Name() string { return c.name }

// Start starts the informers and workers and returns once the caches are
// synced, or with ctx's error. The controller runs until Stop.
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("compositecontroller", c.name)
	c.loop = loop.New(loop.Options{Name: c.name, Workers: c.opts.Workers, RateLimiter: c.opts.RateLimiter}, c.failing.Track(c.sync))

	c.watches = controller.NewWatches(c.opts.Informers)
	var err error
	if c.parentInformer, err = c.watches.Watch(c.parent.GroupVersionResource(), c.parentHandler()); err != nil {
		return err
	}
	for _, child := range c.children.Resources {
		if child.Informer, err = c.watches.Watch(child.GroupVersionResource(), c.childHandler()); err != nil {
			return err
		}
	}
	if c.rolling() {
		if c.revisions, err = c.watches.Watch(v1alpha1.ControllerRevisionResource, nil); err != nil {
			return err
		}
	}
	if !c.watches.WaitForSync(ctx) {
		return fmt.Errorf("waiting for caches of compositecontroller %s: %w", c.name, ctx.Err())
	}

	if hook := c.cc.Spec.Hooks.Customize; hook != nil {
		c.related = related.New(related.Options{
			Controller: c.name, Object: c.object, Customize: hook, Version: *c.cc.Spec.Hooks.Sync.Version,
			Hooks: c.opts.Hooks, Resources: c.opts.Resources, Informers: c.opts.Informers, Enqueue: c.loop.Add,
		})
	}
	c.loop.Start(klog.NewContext(ctx, logger))
	if p := c.cc.Spec.ResyncPeriodSeconds; p != nil {
		period := time.Duration(*p) * time.Second
		c.resync.Add(1)
		go func() {
			defer c.resync.Done()
			wait.Until(c.enqueueAllParents, period, c.stop)
		}()
	}
	logger.Info("Started compositecontroller", "parent", c.parent.GroupVersionResource(), "children", len(c.children.Resources), "workers", c.opts.Workers)
	return nil
}

// Stop stops taking work, waits for in-flight syncs to finish, and releases
// the informers. It is idempotent.
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
// parent that carries it; for a deleted CompositeController, whose parents
// would otherwise wait for a finalize hook that is never called again. It
// reads the parents uncached, so that none that got the finalizer a moment
// ago is missed. A parent resource the server no longer serves has no
// parents left to clean. Other failures are *finalizer.RemainingError. Call
// Stop afterwards.
func (c *Controller) Cleanup(ctx context.Context) error {
	if c.loop != nil {
		c.loop.Stop()
	}
	metrics.UncachedReads.WithLabelValues(c.name, "cleanup").Inc()
	return finalizer.RemoveFromAll(ctx, c.opts.Client, c.parent.GroupVersionResource(), finalizerPrefix+c.name)
}

func (c *Controller) enqueueAllParents() {
	for _, parent := range c.parentInformer.ListMeta("", nil) {
		c.loop.Add(parentKey(parent.GetNamespace(), parent.GetName()))
	}
}

func parentKey(namespace, name string) string {
	return cache.NewObjectName(namespace, name).String()
}
