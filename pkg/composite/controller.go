package composite

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// Options are what a Controller needs from the process around it.
type Options = engine.Options

// InvalidSpecError reports a controller object whose spec is invalid.
type InvalidSpecError = engine.InvalidSpecError

// Controller runs one CompositeController: its engine runs it, and
// Controller is the engine's engine.Controller. What runs it (the manager,
// metactl plan, tests) uses the engine's engine.Runner.
type Controller struct {
	engine.Runner
	// eng is the engine that runs the controller (and is its Runner).
	eng *engine.Engine

	name string
	// object is the CompositeController as the user wrote it; hooks receive it.
	object *unstructured.Unstructured
	// cc is the defaulted typed copy the controller reads.
	cc   *v1alpha1.CompositeController
	opts Options

	parent *discovery.Resource
	// parents is the parent resource as the engine syncs it.
	parents  *engine.Watched
	children *children.Declared
	// selectors are the parents' child selectors, for orphans' events.
	selectors selectorCache

	// revisions watches ControllerRevisions, for parents with rolling
	// child resources; nil without any.
	revisions *informer.Informer
}

// New validates the CompositeController object and resolves its resources
// through discovery. It returns an *InvalidSpecError for an invalid spec and
// an error satisfying discovery.IsNotFound for a resource the server does
// not serve. The controller does nothing until Start.
func New(ctx context.Context, object *unstructured.Unstructured, opts Options) (*Controller, error) {
	cc := &v1alpha1.CompositeController{}
	if err := engine.DecodeSpec(object, cc, v1alpha1.ValidateCompositeController, engine.AbsentChildrenAnnotation); err != nil {
		return nil, err
	}
	v1alpha1.SetDefaults_CompositeController(cc)

	c := &Controller{name: cc.Name, object: object.DeepCopy(), cc: cc, opts: opts}
	var err error
	pr := cc.Spec.ParentResource
	if c.parent, err = opts.Resources.Get(ctx, pr.APIVersion, pr.Resource); err != nil {
		return nil, fmt.Errorf("spec.parentResource: %w", err)
	}
	c.parents = &engine.Watched{Resource: c.parent, IgnoreStatusChanges: c.ignoreStatusChanges(), Noun: "parent"}
	if pr.LabelSelector != nil {
		selector, err := metav1.LabelSelectorAsSelector(pr.LabelSelector)
		if err != nil {
			return nil, &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "parentResource", "labelSelector"), "", err.Error())}}
		}
		c.parents.Selects = func(parent metav1.Object) bool { return selector.Matches(informer.LabelsOf(parent)) }
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
		if j := children.OtherVersion(declared, &children.Resource{Resource: res}); j >= 0 {
			return nil, &engine.InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "childResources").Index(i).Child("apiVersion"), rule.APIVersion,
				children.OtherVersionMessage("childResources", declared[j].APIVersion))}}
		}
		var earlier int
		declared, earlier = children.Declare(declared, &children.Resource{Resource: res, Method: rule.UpdateStrategy.Method, StatusChecks: rule.UpdateStrategy.StatusChecks})
		if earlier >= 0 {
			engine.ReportRepeated(ctx, opts.Recorder, c.object, "childResources", i, earlier, res, declared[earlier].Method)
		}
	}
	c.children = children.NewDeclared(declared)
	c.eng = engine.NewEngine(engine.Config{
		Kind: "CompositeController", Resource: v1alpha1.CompositeControllerResource, Object: c.object,
		Hooks: cc.Spec.Hooks.Hooks, Finalizer: finalizerPrefix + cc.Name,
		List: "children", Annotation: engine.AbsentChildrenAnnotation,
		ResyncPeriodSeconds: cc.Spec.ResyncPeriodSeconds,
		Log:                 []any{"parent", c.parent.GroupVersionResource(), "children", len(c.children.Resources)},
	}, opts, c)
	c.Runner = c.eng
	return c, nil
}

// Rolling reports whether a child resource updates with a rolling method
// (New accepts these only for a namespaced parent).
func (c *Controller) Rolling() bool {
	return slices.ContainsFunc(c.children.Resources, func(r *children.Resource) bool { return r.Method.IsRolling() })
}

// Access is the Engine's, and, for rolling child resources, what the
// controller does with ControllerRevisions in its parents' namespaces.
func (c *Controller) Access() []rbac.Access {
	access := c.eng.Access()
	if c.Rolling() {
		revisions := &discovery.Resource{
			APIVersion: v1alpha1.ControllerRevisionResource.GroupVersion().String(),
			Name:       v1alpha1.ControllerRevisionResource.Resource, Kind: "ControllerRevision", Namespaced: true,
		}
		access = append(access, rbac.Access{Resource: revisions, Verbs: rbac.ChildVerbs})
	}
	return access
}

// Watch acquires the informers of parents, children and, for rolling
// child resources, ControllerRevisions (engine.Controller).
func (c *Controller) Watch(w *engine.Watches) error {
	var err error
	forget := func(parent metav1.Object) { c.forgetSelector(parent.GetUID()) }
	if c.parents.Informer, err = w.Watch(c.parent.GroupVersionResource(), c.eng.ObjectHandler(c.parentKey, nil, c.ignoreStatusChanges(), forget)); err != nil {
		return err
	}
	owners := engine.Owners{Keys: c.ownerKeys, Orphan: c.enqueueCandidates}
	for _, child := range c.children.Resources {
		owners.Resource = child.GroupVersionResource().GroupResource().String()
		if child.Informer, err = w.Watch(child.GroupVersionResource(), c.eng.DependentHandler(owners)); err != nil {
			return err
		}
	}
	if c.Rolling() {
		if c.revisions, err = w.Watch(v1alpha1.ControllerRevisionResource, nil); err != nil {
			return err
		}
	}
	return nil
}

// Keys returns the key of every parent in the cache (engine.Controller).
func (c *Controller) Keys() []engine.Key {
	var keys []engine.Key
	for _, parent := range c.parents.Informer.ListMeta("", nil) {
		keys = append(keys, c.parentKey(parent))
	}
	return keys
}

// Resources returns the parent resource (engine.Controller).
func (c *Controller) Resources() []*engine.Watched { return []*engine.Watched{c.parents} }

// KeyOf returns the parent resource and obj's queue key when obj is a
// parent (engine.Keyer).
func (c *Controller) KeyOf(obj *unstructured.Unstructured) (engine.Key, bool) {
	if obj.GetAPIVersion() != c.parent.APIVersion || obj.GetKind() != c.parent.Kind {
		return engine.Key{}, false
	}
	return c.parentKey(obj), true
}

// Dependents returns the child resources (engine.Controller).
func (c *Controller) Dependents() *children.Declared { return c.children }

// parentKey is a parent's queue key.
func (c *Controller) parentKey(parent metav1.Object) engine.Key {
	return engine.KeyOf(c.parents, parent)
}
