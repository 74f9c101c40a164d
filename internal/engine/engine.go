package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/echo"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Config is what an Engine is told of its controller object.
type Config struct {
	// Kind is the controller's kind as users write it
	// ("CompositeController").
	Kind string
	// Resource is the controller objects' resource, to read the object
	// uncached.
	Resource schema.GroupVersionResource
	// Object is the controller object as the user wrote it; hooks get it.
	Object *unstructured.Unstructured
	// Hooks are the controller's defaulted hooks.
	Hooks v1alpha1.Hooks
	// Finalizer is the finalizer the controller puts on its objects while
	// it has a finalize hook.
	Finalizer string
	// List is the answers' list ("children") and Annotation the
	// annotation that chooses how its absence is read (see Answers).
	List, Annotation string
	// Noun is what Events and logs call a dependent: "child" (the
	// default) or "attachment".
	Noun string
	// ResyncPeriodSeconds, when set, syncs every object again at that
	// period.
	ResyncPeriodSeconds *int32
	// Describe names an object by its queue key in the controller's
	// status; nil uses the key's text (Key.String).
	Describe func(key Key) string
	// Log are key/value pairs for the start-up log line.
	Log []any
}

// hookClient makes the hook calls; *hookclient.Client is one.
type hookClient interface {
	Call(ctx context.Context, controller, name string, hook *v1alpha1.Hook, request any, response hooks.Response, opts hookclient.CallOptions) error
}

// objectWriter patches the synced objects (finalizers, labels and
// annotations, status) and returns their metadata as written.
type objectWriter interface {
	Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error)
}

// dependentWriter writes an object's children (attachments);
// *children.Writer is one.
type dependentWriter interface {
	Manage(ctx context.Context, parent *unstructured.Unstructured, resources []*children.Resource, observed, desired map[*children.Resource]children.Set) (*children.Result, error)
	// Differs reports whether writing desired over observed, a child,
	// would change it, by the writer's own rule (children.Writer.Differs).
	Differs(observed, desired *unstructured.Unstructured) (bool, error)
}

// queue is the work queue, as the Engine uses it; *loop.Loop is one.
type queue interface {
	AddFor(key Key, t trigger.Trigger)
	AddAfterFor(key Key, delay time.Duration, t trigger.Trigger)
}

// Engine runs one controller of any kind: its informers, work queue and
// workers, and the sync of each object (see sync.go). Safe for concurrent
// use; Stop cancels in-flight syncs and waits for them, for a bounded time.
type Engine struct {
	cfg        Config
	opts       Options
	controller Controller
	name       string
	// kindName names the kind in Events, logs and errors
	// ("compositecontroller").
	kindName string

	// The seams: hooks, writes and the queue (the loop, behind a
	// gatedQueue with Options.Gate: every key the Engine queues goes
	// through it).
	hooks      *HookCaller
	objects    objectWriter
	dependents dependentWriter
	queue      queue

	// echoes are this controller's own writes, whose watch events need no
	// sync: the sync that wrote them already acted on their result.
	echoes *echo.Echoes[Key]
	// unsettled reports objects whose hook did not reach a fixed point.
	unsettled *Unsettled
	// failing holds the objects whose last sync failed.
	failing *Failing
	// blockers are the objects holding desired dependents' names, and
	// who waits for them to go.
	blockers blockers
	// answers reports unknown keys in answers and refuses those without
	// their list.
	answers *Answers
	// related serves the customize hook; nil without one.
	related *related.Resolver[Key]
	// synced maintains the metactl.io/Synced condition (synced.go).
	synced *syncedConditions
	// prunedWarned holds the resources (*Watched) whose status schema was
	// found to drop fields of a hook's status (warnPruned).
	prunedWarned sync.Map
	// recording: its hook calls are recorded (recording.go).
	recording bool

	watches  *Watches
	loop     *loop.Loop[Key]
	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	resync   sync.WaitGroup
}

// NewEngine returns the Engine of the controller cfg describes, with kind
// supplying what its kind does. Nothing runs until Start.
func NewEngine(cfg Config, opts Options, kind Controller) *Engine {
	name := cfg.Object.GetName()
	kindName := strings.ToLower(cfg.Kind)
	e := &Engine{
		cfg: cfg, opts: opts, controller: kind, name: name, kindName: kindName,
		hooks:   &HookCaller{Hooks: opts.Hooks, Controller: name, OnHealthChange: opts.OnHealthChange},
		objects: restObjects{opts.Objects},
		dependents: &children.Writer{Objects: opts.Objects, Controller: name, OnWrite: history.WritesOf(name), Recorder: opts.Recorder, Noun: cfg.Noun,
			ServerSide: serverSide(cfg.Object, opts)},
		echoes:    echo.New[Key](),
		unsettled: &Unsettled{Controller: name, Kind: kindName, Recorder: opts.Recorder},
		failing:   &Failing{Describe: cfg.Describe},
		stop:      make(chan struct{}),
	}
	e.recording = recordingEnabled(cfg.Object, opts)
	e.synced = &syncedConditions{e: e, enabled: syncedConditionEnabled(cfg.Object, opts.SyncedCondition), owner: kindName + " " + name}
	e.answers = &Answers{
		Kind: kindName, Resource: cfg.Kind, Controller: name,
		List: cfg.List, Annotation: cfg.Annotation,
		Object: cfg.Object, Recorder: opts.Recorder,
		Current: func(ctx context.Context) (*unstructured.Unstructured, error) {
			metrics.UncachedReads.WithLabelValues(name, "annotation").Inc()
			self := opts.Self
			if self == nil {
				self = opts.Client
			}
			return self.Resource(cfg.Resource).Get(ctx, name, metav1.GetOptions{})
		},
	}
	return e
}

// restObjects adapts the Patch of Options.Objects to objectWriter.
type restObjects struct{ client children.Objects }

func (r restObjects) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
	patched, err := r.client.Patch(ctx, gvr, namespace, name, pt, data, subresources...)
	if err != nil {
		return nil, err
	}
	return patched, nil
}

// Name returns the controller's name.
func (e *Engine) Name() string { return e.name }

// Finalizer returns the finalizer the controller puts on its objects
// while it has a finalize hook.
func (e *Engine) Finalizer() string { return e.cfg.Finalizer }

// HookCredentialError returns the error of the last hook call (sync,
// finalize or customize) when it failed for the hook's credentials (a
// missing Secret, a malformed CA bundle, ...), else nil.
func (e *Engine) HookCredentialError() error { return e.hooks.CredentialError() }

// Failing returns the set of objects whose last sync failed.
func (e *Engine) Failing() *Failing { return e.failing }

// Access lists what the controller must be allowed to do: read and update
// its objects (and their status), and manage their dependents.
func (e *Engine) Access() []rbac.Access {
	var access []rbac.Access
	for _, res := range e.controller.Resources() {
		access = append(access, rbac.Access{Resource: res.Resource, Verbs: rbac.OwnerVerbs, Synced: true})
		if res.HasStatus && !StatusInAnnotation(res) {
			// A built-in object's status is never written: its hook's
			// goes into an annotation (StatusInAnnotation).
			access = append(access, rbac.Access{Resource: res.Resource, Subresource: "status", Verbs: rbac.StatusVerbs, Synced: true})
		}
	}
	for _, res := range e.controller.Dependents().Resources {
		access = append(access, rbac.Access{Resource: res.Resource, Verbs: rbac.ChildVerbs})
	}
	return access
}

// Start starts the informers and the work queue (whose workers start as
// keys wait) and returns once the caches are synced, or with ctx's error.
// The controller runs until Stop.
func (e *Engine) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues(e.kindName, e.name)
	if err := e.StartCaches(ctx); err != nil {
		return err
	}
	if e.opts.Record != nil {
		e.opts.Record.Enable(e.historyID(), e.recording)
	}
	e.loop.Start(klog.NewContext(ctx, logger))
	if p := e.cfg.ResyncPeriodSeconds; p != nil {
		e.resync.Add(1)
		go func() {
			defer e.resync.Done()
			wait.Until(func() {
				for _, key := range e.controller.Keys() {
					e.queue.AddFor(key, trigger.Trigger{Cause: trigger.CauseResync})
				}
			}, time.Duration(*p)*time.Second, e.stop)
		}()
	}
	logger.Info("Started "+e.kindName, e.cfg.Log...)
	return nil
}

// StartCaches is Start without the work queue's workers: it starts the
// informers, waits for their caches and makes the customize hook's
// resolver; keys queued meanwhile wait, unsynced. Alone, it readies the
// Engine for SyncOnce (metactl plan); Stop releases what it started.
func (e *Engine) StartCaches(ctx context.Context) error {
	e.loop = loop.New(loop.Options[Key]{Name: e.name, Workers: e.opts.Workers, Share: e.opts.Share, RateLimiter: e.opts.RateLimiter,
		StopGracePeriod: e.opts.StopGracePeriod}, e.gated(e.failing.track(e.sync)))
	e.queue = e.loop
	if e.opts.Gate != nil {
		e.queue = gatedQueue{queue: e.loop, gate: e.opts.Gate}
	}
	maxResources := e.opts.MaxResources
	if maxResources <= 0 {
		maxResources = DefaultMaxResources
	}
	e.watches = newWatches(e.opts.Informers, e.opts.Whole, maxResources)
	if err := e.controller.Watch(e.watches); err != nil {
		return err
	}
	if !e.watches.WaitForSync(ctx) {
		return fmt.Errorf("waiting for caches of %s %s: %w", e.kindName, e.name, ctx.Err())
	}
	if hook := e.cfg.Hooks.Customize; hook != nil {
		left := maxResources - e.watches.Distinct()
		if left <= 0 {
			left = -1
		}
		e.related = related.New(related.Options[Key]{
			Object: e.cfg.Object, Customize: hook,
			Hooks: e.hooks, Resources: e.opts.Resources, Informers: e.opts.Informers, Enqueue: e.queue.AddFor,
			MaxObjects: e.opts.MaxRelatedObjects,
			MaxRules:   e.opts.MaxRelatedRules,
			// What the spec's resources leave (negative: none).
			MaxResources: left,
			MayRead:      e.opts.MayRead,
		})
	}
	return nil
}

// SyncOnce runs one sync of obj (the whole reconcile of sync.go, from the
// finalizer decision on) on the calling goroutine, without the work
// queue, after StartCaches. obj need not be in the cache (nor exist). It
// returns the Target as the sync left it: its Object carries the
// metadata and status of the sync's writes, Observed the dependents
// found before the rounds; and the sync's error (IsNotSettled when the
// hook did not settle). The Controller must be a Keyer. Options.Gate does
// not apply: the caller chose obj (metactl plan syncs what it is asked,
// on a dry-run client, whichever replica holds its bucket).
func (e *Engine) SyncOnce(ctx context.Context, obj *unstructured.Unstructured) (*Target, error) {
	keyer, ok := e.controller.(Keyer)
	if !ok {
		return nil, fmt.Errorf("%s %s cannot sync one object alone", e.kindName, e.name)
	}
	key, ok := keyer.KeyOf(obj)
	if !ok {
		return nil, fmt.Errorf("%s %s does not sync %s objects", e.kindName, e.name, obj.GroupVersionKind())
	}
	hold := hookclient.NewHold()
	defer hold.Release()
	res := key.Resource
	t := &Target{Object: obj.DeepCopy(), Resource: res, Selected: res.Selects == nil || res.Selects(obj)}
	_, err := e.syncTarget(ctx, &loop.Sync[Key]{Key: key}, hookclient.CallOptions{Hold: hold}, t)
	return t, err
}

// Stop stops taking work, cancels the syncs in flight (their hook calls
// end; they write nothing more) and waits for them to return, at most
// Options.StopGracePeriod (see loop.Loop.Stop), then releases the
// informers. It is idempotent.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() {
		close(e.stop)
		e.resync.Wait()
		if e.loop != nil {
			e.loop.Stop()
		}
		if e.related != nil {
			e.related.Close()
		}
		if e.watches != nil {
			e.watches.Release()
		}
	})
}

// Cleanup stops the controller's syncs and removes its finalizer from every
// object that carries it; for a deleted controller object, whose objects
// would otherwise wait for a finalize hook that is never called again. It
// reads the objects uncached, so that none that got the finalizer a moment
// ago is missed. A resource the server no longer serves has no objects left
// to clean. Other failures are *finalizer.RemainingError, one per resource.
// The controller's recorded hook calls (Options.Record) are dropped. Call
// Stop afterwards.
func (e *Engine) Cleanup(ctx context.Context) error {
	if e.loop != nil {
		e.loop.Stop()
	}
	if e.opts.Record != nil {
		e.opts.Record.Forget(e.historyID())
	}
	var errs []error
	for _, res := range e.controller.Resources() {
		metrics.UncachedReads.WithLabelValues(e.name, "cleanup").Inc()
		errs = append(errs, finalizer.RemoveFromAll(ctx, e.opts.Client, res.GroupVersionResource(), e.cfg.Finalizer))
	}
	return errors.Join(errs...)
}
