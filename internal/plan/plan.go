package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/jsondiff"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// FieldManager is the field manager of the server-side apply dry run that
// gives a parent read from a file its defaults (Planner.Given).
const FieldManager = "metactl-plan"

// Options configure a Planner.
type Options struct {
	// Config reaches the API server; the Planner copies it and wraps its
	// transport with DryRun.
	Config *rest.Config
	// Controllers are the controller objects to plan (--controller); nil
	// plans every CompositeController and DecoratorController in the
	// cluster that manages the object.
	Controllers []*unstructured.Unstructured
	// HookURL, when set, replaces the address of the sync and finalize
	// hooks; CustomizeHookURL that of the customize hook (default:
	// HookURL's host, the hook's own path). See v1alpha1.OverrideHookURLs:
	// a replaced hook gets no credentials.
	HookURL, CustomizeHookURL string
	// CacheTimeout bounds the wait for each controller's caches (its
	// informers' first lists); 0 is DefaultCacheTimeout. A list the API
	// server refuses ends the wait at once (see ListError).
	CacheTimeout time.Duration
}

// DefaultCacheTimeout is Options.CacheTimeout's default.
const DefaultCacheTimeout = 60 * time.Second

// ListError is a list of a controller's informer that failed: the plan
// stops at once, rather than wait for caches that will not fill (the
// informers list and watch each resource in every namespace, as metactl
// run's do).
type ListError struct {
	Resource schema.GroupVersionResource
	Err      error
}

func (e *ListError) Error() string {
	return fmt.Sprintf("listing %s in all namespaces (cluster scope): %v; metactl plan reads the parent's, children's and related objects' resources as metactl run does, through caches that list and watch each resource cluster-wide: it needs list and watch on %s at cluster scope (a ClusterRole and ClusterRoleBinding), not only in the object's namespace",
		e.Resource.GroupResource(), e.Err, e.Resource.GroupResource())
}

func (e *ListError) Unwrap() error { return e.Err }

// Planner plans the syncs of objects. Close releases it.
type Planner struct {
	opts      Options
	dry       *DryRun
	client    dynamic.Interface
	objects   *objectclient.Client
	resources *discovery.ResourceMap
	informers *informer.Factory
	transport *credentials.SecureTransport
	creds     *credentials.WatchingCredentialSource

	// listFailed, while a controller's caches are started, ends its
	// wait with the first list error of an informer.
	mu         sync.Mutex
	listFailed context.CancelCauseFunc
}

// New returns a Planner whose every API request goes through a DryRun.
func New(opts Options) (*Planner, error) {
	p := &Planner{opts: opts, dry: &DryRun{}}
	cfg := rest.CopyConfig(opts.Config)
	cfg.Wrap(p.dry.Wrap)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the API server's HTTP client: %w", err)
	}
	if p.client, err = dynamic.NewForConfigAndClient(cfg, httpClient); err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	if p.objects, err = objectclient.New(cfg, httpClient); err != nil {
		return nil, err
	}
	dc, err := clientdiscovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the discovery client: %w", err)
	}
	core, err := typedcorev1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the core/v1 client: %w", err)
	}
	p.resources = discovery.NewResourceMap(dc, discovery.Options{})
	p.informers = informer.NewFactory(p.listerWatcher, informer.Options{})
	// The hooks' credentials, read with the user's own rights: whatever
	// namespace the controller names, as metactl run --credential-namespaces='*'.
	p.creds = credentials.NewWatchingCredentialSource(credentials.CoreV1GetterFunc(func() typedcorev1.CoreV1Interface { return core }))
	p.transport = credentials.NewSecureTransport(p.creds, credentials.CredentialPolicy{Namespaces: []string{credentials.AllNamespaces},
		InsecureHint: "pass --hook-url to call the hook elsewhere (such as a copy running on this machine): metactl plan sends no credentials to a hook it replaces"})
	return p, nil
}

// listerWatcher is the objects' ListerWatcher, its list errors reported
// to the controller whose caches are starting (listFailed).
func (p *Planner) listerWatcher(gvr schema.GroupVersionResource) cache.ListerWatcher {
	lw := cache.ToListerWatcherWithContext(p.objects.ListerWatcher(gvr))
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := lw.ListWithContext(ctx, opts)
			if err != nil && ctx.Err() == nil {
				p.mu.Lock()
				if p.listFailed != nil {
					p.listFailed(&ListError{Resource: gvr, Err: err})
				}
				p.mu.Unlock()
			}
			return obj, err
		},
		WatchFuncWithContext: lw.WatchWithContext,
	}
}

// Close stops what the Planner started.
func (p *Planner) Close() { p.creds.Stop() }

// ObjectRef names an object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

func refOf(obj *unstructured.Unstructured) ObjectRef {
	return ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
}

func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// Live returns the object of resource gvr named namespace/name as the API
// server has it.
func (p *Planner) Live(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	obj, err := p.client.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// Given returns obj, read from a file, as it would be once applied: a
// server-side apply dry run (FieldManager, forced), so that defaulting and
// admission are included, in namespace when obj has none and its
// resource is namespaced. exists reports whether the object exists; when
// it does not, the result carries the UID of the dry run's create.
func (p *Planner) Given(ctx context.Context, obj *unstructured.Unstructured, namespace string) (applied *unstructured.Unstructured, exists bool, err error) {
	res, err := p.resources.ObjectKind(ctx, obj)
	if err != nil {
		return nil, false, err
	}
	obj = obj.DeepCopy()
	if !res.Namespaced {
		obj.SetNamespace("")
	} else if obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	if obj.GetName() == "" {
		return nil, false, errors.New("the object has no metadata.name")
	}
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(obj.Object, "metadata", "resourceVersion")
	client := p.client.Resource(res.GroupVersionResource()).Namespace(obj.GetNamespace())
	switch _, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{}); {
	case err == nil:
		exists = true
	case !apierrors.IsNotFound(err):
		return nil, false, err
	}
	applied, err = client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return nil, false, fmt.Errorf("server-side apply dry run of %s: %w", refOf(obj), err)
	}
	return applied, exists, nil
}

// Report is the plan of one object: one ControllerPlan per controller
// that manages it.
type Report struct {
	// Object is the object planned.
	Object ObjectRef `json:"object"`
	// Exists: the object exists; false for a file's object not yet
	// created (its UID is the dry run's).
	Exists bool `json:"exists"`
	// Controllers are the plans, one per controller.
	Controllers []*ControllerPlan `json:"controllers"`
}

// Changed reports whether any controller would change anything.
func (r *Report) Changed() bool {
	for _, c := range r.Controllers {
		if c.Changed {
			return true
		}
	}
	return false
}

// Failed reports whether any controller's plan failed (Error).
func (r *Report) Failed() bool {
	for _, c := range r.Controllers {
		if c.Error != "" {
			return true
		}
	}
	return false
}

// ControllerPlan is what one controller would do to the object in one
// sync.
type ControllerPlan struct {
	// Controller names the controller object.
	Controller ObjectRef `json:"controller"`
	// Selected: the controller selects the object (its selectors match);
	// Finalizing: the finalize hook is called (the object is being
	// deleted, or carries the finalizer but is no longer selected).
	Selected   bool `json:"selected"`
	Finalizing bool `json:"finalizing"`
	// HookCalls counts the hook calls, by hook (sync, finalize,
	// customize).
	HookCalls map[string]int `json:"hookCalls"`
	// Settled: the last answer asked for nothing more (a call with the
	// state its writes leave changes nothing); false when the hook still
	// asked for changes after engine.MaxRounds calls, or failed, or
	// Rolling.
	Settled bool `json:"settled"`
	// Rolling: a rolling update wrote one revision's children, which ends
	// a sync (the next revision is the next sync's), so whether the hook
	// settles was not checked.
	Rolling bool `json:"rolling,omitempty"`
	// Error is the sync's error, as the reconciler reports it: a hook
	// that fails or answers invalidly, a write the API server refuses.
	Error string `json:"error,omitempty"`
	// Changed: a child (attachment) or the object would change, or the
	// hook did not settle (and the sync did not fail).
	Changed bool `json:"changed"`
	// Children are the children (attachments), observed or desired.
	Children []*Child `json:"children"`
	// Object are the changes to the object itself: its labels,
	// annotations, finalizers and status.
	Object []jsondiff.Change `json:"object"`
	// Events are the Events the sync would record: the hook's and
	// metactl's own.
	Events []Event `json:"events"`
	// Writes are the write requests of the sync, each sent as a dry run
	// (or simulated), with their answers.
	Writes []Write `json:"writes"`
}

// Child actions.
const (
	Create    = "create"
	Update    = "update"
	Replace   = "replace" // deleted and created again (Recreate, a rolling method)
	Delete    = "delete"
	Unchanged = "unchanged"
)

// Child is one child (attachment) and what the sync would do to it.
type Child struct {
	ObjectRef
	// Action is create, update, replace, delete or unchanged.
	Action string `json:"action"`
	// Changes are the fields that would change: the live object against
	// the dry run's result, metadata the server maintains left out.
	Changes []jsondiff.Change `json:"changes,omitempty"`
	// Error is the API server's refusal of a write of it.
	Error string `json:"error,omitempty"`
}

// kindController is what the plan uses of a composite or decorator
// Controller.
type kindController interface {
	engine.Keyer
	StartCaches(ctx context.Context) error
	SyncOnce(ctx context.Context, obj *unstructured.Unstructured) (*engine.Target, error)
	Stop()
	Dependents() *children.Declared
	Finalizer() string
}

// callCounter counts hook calls by hook.
type callCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) ObserveHookCall(_, hook string, _ int, _ time.Duration) {
	c.mu.Lock()
	c.calls[hook]++
	c.mu.Unlock()
}

// build builds the controller of obj, with a fresh hook client and Event
// collector.
func (p *Planner) build(ctx context.Context, obj *unstructured.Unstructured, calls *callCounter, events *eventCollector) (kindController, error) {
	opts := engine.Options{
		Client: p.client, Objects: p.objects, Resources: p.resources, Informers: p.informers,
		Hooks:    hookclient.NewClient(hookclient.Options{Transport: p.transport, PrepareRequest: p.transport, Metrics: calls}),
		Recorder: events, Workers: 1,
	}
	if obj.GetAnnotations()[rbac.ServiceAccountAnnotation] != "" {
		// As metactl run serves a controller acting as an account: its
		// customize rules reach any namespace, within what may be read
		// (here the planner's own rights). Without the annotation, a
		// namespaced parent's rules stay in its namespace, as in run.
		opts.MayRead = func(context.Context, *discovery.Resource, string) error { return nil }
	}
	switch obj.GetKind() {
	case "CompositeController":
		return composite.New(ctx, obj, opts)
	case "DecoratorController":
		return decorator.New(ctx, obj, opts)
	}
	return nil, fmt.Errorf("%s: not a CompositeController or DecoratorController", refOf(obj))
}

// managing is a controller to plan for an object and the object as the
// controller reads it (objectFor), nil when not read yet.
type managing struct {
	ctrl, at *unstructured.Unstructured
}

// controllers returns the controllers to plan for obj, each with obj as
// it reads it: Options' Controllers, else those of the cluster that manage
// obj (its resource, selected by their selectors, or carrying their
// finalizer). unbuilt are the controllers of the cluster that could not be
// built (an invalid spec, a resource not served), which cannot be told to
// manage obj or not: "KIND NAME: error".
func (p *Planner) controllers(ctx context.Context, obj *unstructured.Unstructured) ([]managing, []string, error) {
	var out []managing
	if p.opts.Controllers != nil {
		for _, c := range p.opts.Controllers {
			out = append(out, managing{ctrl: c})
		}
		return out, nil, nil
	}
	var unbuilt []string
	for _, gvr := range []schema.GroupVersionResource{v1alpha1.CompositeControllerResource, v1alpha1.DecoratorControllerResource} {
		list, err := p.client.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			if c.GetDeletionTimestamp() != nil {
				continue
			}
			k, err := p.build(ctx, c, &callCounter{calls: map[string]int{}}, &eventCollector{})
			if err != nil {
				unbuilt = append(unbuilt, fmt.Sprintf("%s: %v", refOf(c), err))
				continue
			}
			at, err := p.objectFor(ctx, c, obj)
			if err != nil {
				continue // not at the controller's version: not this controller's
			}
			key, ok := k.KeyOf(at)
			if !ok {
				continue
			}
			if res := key.Resource; res.Selects == nil || res.Selects(at) || slices.Contains(at.GetFinalizers(), k.Finalizer()) {
				out = append(out, managing{ctrl: c, at: at})
			}
		}
	}
	return out, unbuilt, nil
}

// Plan plans one sync of obj by each controller of Controllers. exists
// says whether obj exists (see Given); writes to an object that does not
// are simulated. An error is returned only when no plan could be made
// (no controller, a controller that cannot be built or started); a sync
// that fails is the plan's Error.
func (p *Planner) Plan(ctx context.Context, obj *unstructured.Unstructured, exists bool) (*Report, error) {
	ctrls, unbuilt, err := p.controllers(ctx, obj)
	if err != nil {
		return nil, err
	}
	if len(ctrls) == 0 {
		msg := fmt.Sprintf("no CompositeController or DecoratorController manages %s (none has its resource and selects it); give one with --controller", refOf(obj))
		if len(unbuilt) > 0 {
			msg += fmt.Sprintf(" (%d controller(s) could not be built, so could not be checked: %s)", len(unbuilt), strings.Join(unbuilt, "; "))
		}
		return nil, errors.New(msg)
	}
	report := &Report{Object: refOf(obj), Exists: exists}
	defer func() { p.dry.Simulate = nil }()
	var gvr schema.GroupVersionResource
	if !exists {
		res, err := p.resources.ObjectKind(ctx, obj)
		if err != nil {
			return nil, err
		}
		gvr = res.GroupVersionResource()
	}
	for _, c := range ctrls {
		if !exists {
			// Each controller's plan starts from the object as given, not
			// as another's simulated writes left it.
			sim, err := newSimulated(obj, gvr)
			if err != nil {
				return nil, err
			}
			p.dry.Simulate = sim.write
		}
		at := c.at
		if at == nil {
			if at, err = p.objectFor(ctx, c.ctrl, obj); err != nil {
				return nil, err
			}
		}
		cp, err := p.planOne(ctx, c.ctrl, at)
		if err != nil {
			return nil, err
		}
		report.Controllers = append(report.Controllers, cp)
	}
	return report, nil
}

// objectFor returns obj as ctrl reads it: at the version of ctrl's rule
// for obj's resource (spec.parentResource, or a DecoratorController's
// spec.resources), which the controller matches exactly; obj itself when
// the versions agree or no rule has obj's group and resource. An object
// at another version is read again at the rule's (the API server converts
// it); one not created yet cannot be.
func (p *Planner) objectFor(ctx context.Context, ctrl, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	res, err := p.resources.ObjectKind(ctx, obj)
	if err != nil {
		return obj, nil // the controller's KeyOf tells
	}
	gvr := res.GroupVersionResource()
	var rules []any
	if r, found, _ := unstructured.NestedMap(ctrl.Object, "spec", "parentResource"); found {
		rules = append(rules, r)
	}
	if rs, found, _ := unstructured.NestedSlice(ctrl.Object, "spec", "resources"); found {
		rules = append(rules, rs...)
	}
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		apiVersion, _ := rule["apiVersion"].(string)
		resource, _ := rule["resource"].(string)
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil || gv.Group != gvr.Group || resource != gvr.Resource {
			continue
		}
		if gv.Version == gvr.Version {
			return obj, nil
		}
		at, err := p.Live(ctx, gv.WithResource(resource), obj.GetNamespace(), obj.GetName())
		if err != nil {
			return nil, fmt.Errorf("%s syncs %s at %s: reading %s at that version: %w", refOf(ctrl), gvr.GroupResource(), apiVersion, refOf(obj), err)
		}
		return at, nil
	}
	return obj, nil
}

// planOne plans one sync of obj by the controller ctrlObj, as a dry
// run: its hook calls, Events, writes, and the changes to obj and its
// children.
func (p *Planner) planOne(ctx context.Context, ctrlObj, obj *unstructured.Unstructured) (*ControllerPlan, error) {
	ctrlObj, err := p.overrideHooks(ctrlObj)
	if err != nil {
		return nil, err
	}
	calls := &callCounter{calls: map[string]int{}}
	events := &eventCollector{}
	k, err := p.startController(ctx, ctrlObj, obj, calls, events)
	if err != nil {
		return nil, err
	}
	p.dry.ForgetDeletes()
	mark := p.dry.Mark()
	t, syncErr := k.SyncOnce(ctx, obj)
	k.Stop()
	cp := &ControllerPlan{
		Controller: ObjectRef{APIVersion: ctrlObj.GetAPIVersion(), Kind: ctrlObj.GetKind(), Name: ctrlObj.GetName()},
		HookCalls:  calls.calls,
		Events:     events.list(),
		Writes:     p.dry.Writes(mark),
	}
	if t == nil {
		return nil, syncErr
	}
	setOutcome(cp, ctrlObj, obj, t, syncErr)
	cp.Children = childrenOf(k.Dependents().Resources, t, obj, cp.Writes)
	cp.Object = objectChanges(obj, t)
	redactWrites(cp.Writes)
	if cp.Error == "" && stopsAtRollingWrite(k, cp.Writes, obj) {
		cp.Rolling, cp.Settled = true, false
	}
	// A hook that does not settle asks for changes, even when its last
	// answer leaves the objects as they are.
	cp.Changed = len(cp.Object) > 0 || (!cp.Settled && cp.Error == "")
	for _, c := range cp.Children {
		cp.Changed = cp.Changed || c.Action != Unchanged
	}
	withEmptyLists(cp)
	return cp, nil
}

// startController builds the controller ctrlObj, its hook calls counted
// in calls and its Events collected in events, and starts its caches;
// an error when it does not sync objects of obj's kind.
func (p *Planner) startController(ctx context.Context, ctrlObj, obj *unstructured.Unstructured, calls *callCounter, events *eventCollector) (kindController, error) {
	k, err := p.build(ctx, ctrlObj, calls, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", refOf(ctrlObj), err)
	}
	if _, ok := k.KeyOf(obj); !ok {
		return nil, fmt.Errorf("%s does not sync %s objects", refOf(ctrlObj), obj.GroupVersionKind())
	}
	if err := p.startCaches(ctx, k); err != nil {
		k.Stop()
		return nil, fmt.Errorf("%s: %w", refOf(ctrlObj), err)
	}
	return k, nil
}

// setOutcome sets in cp whether the sync t of obj by ctrlObj, which
// returned syncErr, selected obj or finalized it, settled, or failed.
func setOutcome(cp *ControllerPlan, ctrlObj, obj *unstructured.Unstructured, t *engine.Target, syncErr error) {
	cp.Selected, cp.Finalizing = t.Selected, t.Finalizing
	switch {
	case syncErr == nil:
		cp.Settled = true
	case engine.IsNotSettled(syncErr):
	default:
		cp.Error = syncErr.Error()
	}
	if !t.Selected && !t.Finalizing {
		cp.Error = fmt.Sprintf("%s does not select %s (its selectors do not match), and the object does not carry its finalizer: it would not be synced", refOf(ctrlObj), refOf(obj))
	}
}

// objectChanges are the changes of obj's own fields that the sync t
// makes.
func objectChanges(obj *unstructured.Unstructured, t *engine.Target) []jsondiff.Change {
	after := t.Object
	if engine.StatusInAnnotation(t.Resource) {
		// t.Object carries the hook's status, which goes into an
		// annotation: the object's real status stays as it is.
		after = engine.WithStatus(t.Object, obj.Object["status"])
	}
	return diff(ownFields(obj), ownFields(after))
}

// redactWrites redacts the requests and responses of writes in place.
func redactWrites(writes []Write) {
	for i := range writes {
		writes[i].Request = redactJSON(writes[i].Request)
		writes[i].Response = redactJSON(writes[i].Response)
	}
}

// stopsAtRollingWrite tells whether metactl run's sync of obj by k would
// end before the dry run's did: at a rolling update's first write of a
// child or revision (the next revision is the next sync's). The dry
// run's writes are not seen as writes by the reconciler (the API server
// keeps the resourceVersion), so its rounds went on: the fixed point was
// not checked as run would reach it.
func stopsAtRollingWrite(k kindController, writes []Write, obj *unstructured.Unstructured) bool {
	// Only a CompositeController moves children one revision at a time
	// (a DecoratorController's rolling methods are not rolling).
	rolling, _ := k.(interface{ Rolling() bool })
	if rolling == nil || !rolling.Rolling() {
		return false
	}
	for _, w := range writes {
		if w.Resource == "controllerrevisions" || isChildWrite(k.Dependents().Resources, w, obj) {
			return true
		}
	}
	return false
}

// withEmptyLists gives cp's lists that are nil an empty value, so that
// they are written as [], not null.
func withEmptyLists(cp *ControllerPlan) {
	if cp.Children == nil {
		cp.Children = []*Child{}
	}
	if cp.Events == nil {
		cp.Events = []Event{}
	}
	if cp.Writes == nil {
		cp.Writes = []Write{}
	}
	if cp.Object == nil {
		cp.Object = []jsondiff.Change{}
	}
}

// startCaches starts k's caches, waiting at most Options.CacheTimeout,
// and stops at the first list error of its informers (a *ListError).
func (p *Planner) startCaches(ctx context.Context, k kindController) error {
	timeout := p.opts.CacheTimeout
	if timeout <= 0 {
		timeout = DefaultCacheTimeout
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("the caches did not fill in %s (--cache-timeout): the API server is slow, or lists too many objects", timeout))
	defer cancelTimeout()
	p.mu.Lock()
	p.listFailed = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.listFailed = nil
		p.mu.Unlock()
	}()
	err := k.StartCaches(ctx)
	if err != nil && context.Cause(ctx) != nil {
		return context.Cause(ctx)
	}
	return err
}

// isChildWrite reports whether w writes a child of one of resources (not
// obj itself).
func isChildWrite(resources []*children.Resource, w Write, obj *unstructured.Unstructured) bool {
	return slices.ContainsFunc(resources, func(res *children.Resource) bool { return writesChildOf(res, w, obj) })
}

// writesChildOf reports whether w writes an object of res other than obj
// itself (obj may be of the same resource as its attachments).
func writesChildOf(res *children.Resource, w Write, obj *unstructured.Unstructured) bool {
	gvr := res.GroupVersionResource()
	if w.Group != gvr.Group || w.Version != gvr.Version || w.Resource != gvr.Resource || w.Subresource != "" {
		return false
	}
	return !(w.Name == obj.GetName() && w.Namespace == obj.GetNamespace() && obj.GetAPIVersion() == res.APIVersion && obj.GetKind() == res.Kind)
}

// diff is jsondiff.Diff, field by field where new adds a whole object:
// each of its fields is a change of its own, not the object on one line.
func diff(old, new map[string]any) []jsondiff.Change {
	return jsondiff.Diff(expand(old, new), new)
}

// expand returns old with an empty object wherever new has an object
// and old has nothing; old is not changed.
func expand(old, new map[string]any) map[string]any {
	out := make(map[string]any, len(old))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range new {
		nm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		switch om := out[k].(type) {
		case map[string]any:
			out[k] = expand(om, nm)
		case nil:
			if _, present := out[k]; !present {
				out[k] = expand(map[string]any{}, nm)
			}
		}
	}
	return out
}

// ownFields are the fields of obj a sync writes: labels, annotations,
// finalizers, status.
func ownFields(obj *unstructured.Unstructured) map[string]any {
	if redacted, ok := redact.Value(obj.Object).(map[string]any); ok {
		obj = &unstructured.Unstructured{Object: redacted}
	}
	meta := map[string]any{}
	if l := obj.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		meta["annotations"] = a
	}
	if f := obj.GetFinalizers(); len(f) > 0 {
		meta["finalizers"] = f
	}
	out := map[string]any{"metadata": meta}
	if s, ok := obj.Object["status"].(map[string]any); ok && len(s) > 0 {
		out["status"] = s
	}
	return toJSON(out)
}

// redactJSON returns body with every Secret's data redacted.
func redactJSON(body json.RawMessage) json.RawMessage {
	if body == nil {
		return nil
	}
	return json.RawMessage(redact.JSON(body))
}

// toJSON returns v as encoding/json decodes it (map[string]string and
// []string become map[string]any and []any).
func toJSON(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	return out
}

// childrenOf reads the sync's writes of children as their actions and
// diffs; a child observed and not written is unchanged.
func childrenOf(resources []*children.Resource, t *engine.Target, obj *unstructured.Unstructured, writes []Write) []*Child {
	var out []*Child
	for _, res := range resources {
		byKey := map[string]*Child{}
		var order []string
		live := t.Observed[res]
		for _, w := range writes {
			if !writesChildOf(res, w, obj) {
				continue
			}
			result := map[string]any{}
			_ = json.Unmarshal(w.Response, &result)
			name := w.Name
			if name == "" { // a create: the name is in the object
				sent := map[string]any{}
				_ = json.Unmarshal(w.Request, &sent)
				name, _, _ = unstructured.NestedString(sent, "metadata", "name")
			}
			key := children.Key(&metav1.ObjectMeta{Namespace: w.Namespace, Name: name})
			c := byKey[key]
			if c == nil {
				c = &Child{ObjectRef: ObjectRef{APIVersion: res.APIVersion, Kind: res.Kind, Namespace: w.Namespace, Name: name}}
				byKey[key] = c
				order = append(order, key)
			}
			if w.Code >= 300 || w.Error != "" {
				c.Error = writeError(w)
			}
			switch w.Method {
			case http.MethodPost:
				if c.Action == Delete {
					c.Action = Replace
				} else if c.Action == "" {
					c.Action = Create
				}
			case http.MethodDelete:
				if c.Action == "" {
					c.Action = Delete
				}
			default:
				if c.Action == "" {
					c.Action = Update
				}
			}
			if w.Method != http.MethodDelete && w.Code < 300 {
				old := map[string]any{}
				if l := live[key]; l != nil && c.Action != Create {
					old = l.Object
				}
				fresh := c.Action == Create || c.Action == Replace // a new object: its UID is not a change
				c.Changes = diff(meaningful(old, fresh), meaningful(result, fresh))
				if c.UID == "" {
					u := unstructured.Unstructured{Object: result}
					c.UID = string(u.GetUID())
				}
			}
		}
		for _, key := range order {
			out = append(out, byKey[key])
		}
		for key, l := range live {
			if byKey[key] != nil {
				continue
			}
			out = append(out, &Child{ObjectRef: refOf(l), Action: Unchanged})
		}
	}
	sortChildren(out)
	return out
}

// sortChildren orders children by kind, namespace and name, keeping each
// resource's together.
func sortChildren(cs []*Child) {
	less := func(a, b *Child) bool {
		if a.APIVersion != b.APIVersion {
			return a.APIVersion < b.APIVersion
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	}
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && less(cs[j], cs[j-1]); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// writeError is the API server's refusal of a write, or the transport's
// error.
func writeError(w Write) string {
	if w.Error != "" {
		return w.Error
	}
	var status metav1.Status
	if json.Unmarshal(w.Response, &status) == nil && status.Message != "" {
		return fmt.Sprintf("%d %s", w.Code, status.Message)
	}
	return fmt.Sprintf("%d %s", w.Code, http.StatusText(w.Code))
}

// meaningful returns obj without what the API server maintains
// (managedFields, resourceVersion, generation, creationTimestamp, the
// UID of a new object) and without metactl's last-applied annotation,
// whose changes the other fields show; a Secret's data is redacted (see
// internal/redact).
func meaningful(obj map[string]any, created bool) map[string]any {
	out, _ := redact.Value(toJSON(obj)).(map[string]any)
	meta, _ := out["metadata"].(map[string]any)
	if meta == nil {
		return out
	}
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "selfLink"} {
		delete(meta, f)
	}
	if created {
		delete(meta, "uid")
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		delete(a, apply.LastAppliedAnnotation)
		if len(a) == 0 {
			delete(meta, "annotations")
		}
	}
	return out
}

// overrideHooks returns ctrl with Options' hook URLs in place of its
// hooks' addresses, by the rule of v1alpha1.OverrideHookURLs (shared with
// metactl hook test), and an error for a hook given as an in-cluster
// Service, which the plan cannot reach from outside the cluster.
func (p *Planner) overrideHooks(ctrl *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	overridden, err := v1alpha1.OverrideHookURLs(ctrl, p.opts.HookURL, p.opts.CustomizeHookURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", refOf(ctrl), err)
	}
	ctrl = overridden
	for _, h := range []struct{ name, flag string }{
		{"sync", "--hook-url"},
		{"finalize", "--hook-url"},
		{"customize", "--customize-hook-url (or --hook-url)"},
	} {
		webhook, found, _ := unstructured.NestedMap(ctrl.Object, "spec", "hooks", h.name, "webhook")
		if !found {
			continue
		}
		if url, _ := webhook["url"].(string); url != "" {
			continue
		}
		if svc, ok := webhook["service"].(map[string]any); ok {
			name, _ := svc["name"].(string)
			ns, _ := svc["namespace"].(string)
			port := "80"
			if v, ok := svc["port"]; ok {
				port = fmt.Sprint(v)
			}
			return nil, fmt.Errorf("%s: the %s hook is the in-cluster Service %s/%s, which metactl plan cannot reach from here; forward a port to it (kubectl port-forward -n %s svc/%s 8080:%s) and pass %s http://127.0.0.1:8080 (a URL without a path keeps each hook's own path)",
				refOf(ctrl), h.name, ns, name, ns, name, port, h.flag)
		}
	}
	return ctrl, nil
}

// simulated is an object that does not exist yet, as the writes of a
// sync would leave it: DryRun answers those writes from it, as the API
// server cannot dry-run a patch of an object it does not have.
type simulated struct {
	mu   sync.Mutex
	gvr  schema.GroupVersionResource
	obj  *unstructured.Unstructured
	data []byte
}

func newSimulated(obj *unstructured.Unstructured, gvr schema.GroupVersionResource) (*simulated, error) {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	return &simulated{gvr: gvr, obj: obj, data: data}, nil
}

// write answers w when it patches the object: a merge patch or a JSON
// patch, applied to the object in memory. They are applied with
// gopkg.in/evanphx/json-patch.v4, the library and major version the API
// server applies them with, so that the plan patches as the server would;
// client-go links it into metactl already (pkg/dynamic/children uses its
// csaupgrade), so it costs the binary nothing.
func (s *simulated) write(w *Write) (int, []byte, bool) {
	if w.Method != http.MethodPatch || w.Group != s.gvr.Group || w.Version != s.gvr.Version || w.Resource != s.gvr.Resource ||
		w.Namespace != s.obj.GetNamespace() || w.Name != s.obj.GetName() || (w.Subresource != "" && w.Subresource != "status") {
		return 0, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		patched []byte
		err     error
	)
	switch ct, _, _ := strings.Cut(w.ContentType, ";"); ct {
	case "application/merge-patch+json":
		patched, err = jsonpatch.MergePatch(s.data, w.Request)
	case "application/json-patch+json":
		var patch jsonpatch.Patch
		if patch, err = jsonpatch.DecodePatch(w.Request); err == nil {
			patched, err = patch.Apply(s.data)
		}
	default:
		return 0, nil, false
	}
	if err != nil {
		body, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Message: "the patch does not apply: " + err.Error(), Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity})
		return http.StatusUnprocessableEntity, body, true
	}
	s.data = patched
	return http.StatusOK, patched, true
}
