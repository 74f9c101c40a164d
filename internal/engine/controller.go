// Package engine is the reconciler engine of every kind of metactl
// controller: an Engine runs one controller object, a kind (pkg/composite,
// pkg/decorator) supplies only what differs (Controller, Sync).
//
// The path of one event:
//
//	informer event → ObjectHandler or DependentHandler (handlers.go) maps it
//	to queue keys, skipping the echoes of the controller's own writes
//	work queue (internal/loop: deduplicating, rate limited, one per
//	controller; syncs on worker goroutines started while keys wait, at
//	most Options.Workers at once, of which loop.DefaultActive() outside
//	their hook calls, those turns shared fairly between the controllers
//	of the process through Options.Share) → Engine.sync (sync.go):
//	   1. the object from the cache (its Key names its Watched resource);
//	      the finalizer decision
//	      (add before the first sync / finalize / remove a stale one)
//	   2. Controller.Observe: children and claims, or attachments, each
//	      counted before it is decoded (Target.CountRequest, requests.go:
//	      the bytes a sync may send its hook, and the process's
//	      RequestBudget of them)
//	   3. related objects: the customize hook (internal/related), counted
//	      so too
//	   4. rounds: the hook (HookCaller, the one caller of every hook), its
//	      answer checked whole (Sync.Desired, Answers), the dependents
//	      written (children.Writer); again with the object as the answer
//	      leaves it until a fixed point (MaxRounds)
//	   5. labels and annotations, then the status, through one client
//	   6. the finalizer removed once the finalize hook is done
//	   7. a later sync: the delay resyncAfterSeconds asks for, at least
//	      Options.MinResyncAfter, returned to the work queue; with backoff
//	      when the hook did not settle (Unsettled)
//	   failure: SyncError Event (recordSyncError), log, metric and retry with
//	   backoff (internal/loop), the object counted as failing (Failing)
//	   either way, for a controller that opts in: the metactl.io/Synced
//	   condition (synced.go), with the status or alone
//
// A failed first hook call or an invalid first answer writes nothing but
// that condition; a later round that fails leaves what the rounds before it wrote. The Engine
// talks to the hooks (hookClient), the API server (objectWriter,
// dependentWriter) and the cache (Controller) through small interfaces, so
// that its rules are tested with fakes.
//
// With Options.Gate (sharding over replicas, docs/scaling.md), every key
// the Engine queues passes Gate.Admits (gatedQueue) and every sync of the
// work queue starts through Gate.Begin (Engine.gated), in gate.go;
// Engine.EnqueueAdmitted queues the objects of buckets taken over.
//
// Engine.StartCaches and Engine.SyncOnce run the same sync for one object
// on the caller's goroutine, without the work queue (metactl plan:
// internal/plan).
//
// The package also holds the Options a controller is built with, the
// error for an invalid spec, and the bookkeeping of informers (Watches)
// and failing objects (Failing).
package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Options are what a controller needs from the process around it; all
// but OnHealthChange and RateLimiter are shared by every controller of a
// process.
type Options struct {
	// Client makes every uncached read and the writes Objects does not.
	Client dynamic.Interface
	// Objects creates, updates and deletes children, and patches the
	// synced objects (finalizers, labels and annotations, status):
	// *objectclient.Client, or in tests internal/inmemory's store.
	Objects children.Objects
	// Self reads the controller object itself; nil means Client. Set
	// when Client and Objects act as the controller's ServiceAccount:
	// the controller object is metactl's to read, not the account's.
	Self dynamic.Interface
	// MayRead, when set, says whether the controller may be served the
	// objects of a related resource (in namespace; "" is every
	// namespace) from the shared cache: nil, or why not.
	MayRead func(ctx context.Context, res *discovery.Resource, namespace string) error
	// MayServe, when set, says whether the controller may be served the
	// objects of a namespace from the shared cache (nil, or why not): it
	// is asked before each sync of an object of that namespace, which
	// fails (a SyncError Event on the object, retried with backoff)
	// before anything of the namespace is read for the hook or written.
	// Default nil: every namespace. internal/manager sets it for a
	// controller acting as a ServiceAccount whose objects are all
	// namespaced (rbac.PerNamespace).
	MayServe func(ctx context.Context, namespace string) error
	// Resources maps the controller's resources.
	Resources *discovery.ResourceMap
	// Informers shares watches among controllers.
	Informers *informer.Factory
	// Hooks calls the webhooks.
	Hooks *hookclient.Client
	// Recorder records Events on the objects the controller syncs.
	Recorder record.EventRecorder
	// Workers is the most objects synced at once; 0 is internal/loop's
	// default (loop.DefaultWorkers).
	Workers int
	// Share holds the turns to run outside a hook wait (loop.Options.Active)
	// that every controller of the process shares, fairly (loop.Share):
	// the process's bound on its active syncs. Default nil: the
	// controller's own turns, loop.DefaultActive() of them.
	Share *loop.Share
	// MinResyncAfter is the shortest delay a hook's resyncAfterSeconds
	// above zero gets: a shorter one is raised to it, so that no answer
	// makes its hook be called in a hot loop. Zero (or negative) means
	// DefaultMinResyncAfter (1s).
	MinResyncAfter time.Duration
	// OnHealthChange, when set, is called when the hooks start or stop
	// failing for their credentials.
	OnHealthChange func()
	// RateLimiter spaces the retries of failing objects; default
	// loop.DefaultRateLimiter[Key]().
	RateLimiter workqueue.TypedRateLimiter[Key]
	// MaxRelatedObjects is the most related objects the customize hook's
	// rules may select for one object; 0 means related.DefaultMaxObjects.
	MaxRelatedObjects int
	// MaxRequestBytes is the most bytes of objects (the object's children
	// or attachments, adopted orphans included, and its related objects,
	// as informer.Object.Size estimates their JSON) one sync's hook
	// requests may carry; more fails the sync before any is decoded or
	// sent (*RequestTooLargeError). 0 means DefaultMaxRequestBytes (16
	// MiB); negative, no limit.
	MaxRequestBytes int64
	// Requests is the process's budget of those bytes, shared by every
	// controller (NewRequestBudget); nil bounds only each sync.
	Requests *RequestBudget
	// MaxRelatedRules is the most rules (relatedResources) one customize
	// answer may declare; 0 means related.DefaultMaxRules.
	MaxRelatedRules int
	// MaxResources is the most distinct resources one controller may
	// watch: those of its spec (parents, children, attachments,
	// ControllerRevisions), for which it does not start, and those its
	// customize answers declare, for which a parent's sync fails. 0 means
	// DefaultMaxResources.
	MaxResources int
	// StopGracePeriod is the longest Stop waits for the syncs in flight,
	// once it has cancelled them; 0 is loop.DefaultStopGracePeriod (10s).
	StopGracePeriod time.Duration
	// SyncedCondition writes the metactl.io/Synced condition on the
	// objects of every controller whose object does not turn it off with
	// SyncedConditionAnnotation "false". Default false: only controllers
	// annotated "true" write it (status belongs to the hook).
	SyncedCondition bool
	// History keeps the record of each object's last syncs (Engine.History),
	// one Store shared by every controller of the process; nil (the
	// default) records nothing and allocates no record per sync.
	History *history.Store
	// Record keeps the hook calls of the controllers that record
	// (RecordAnnotation, RecordAll); it must be the Tap of Hooks. nil
	// (the default) records nothing, whatever the annotation says.
	Record *hookrecord.Recorder
	// RecordAll records the hook calls of every controller whose object
	// does not turn it off with RecordAnnotation "false". Default false:
	// only controllers annotated "true" record.
	RecordAll bool
	// Tracer, when set, records a span of every sync (docs/tracing.md);
	// it should be the Tracer of Hooks too. Default nil: no span is
	// recorded, each sync only gets trace ids for its hook requests.
	Tracer trace.Tracer
	// ApplyStrategy is how the children of every controller whose object
	// has no ApplyStrategyAnnotation are written; "" (the default) is
	// ApplyClientSide.
	ApplyStrategy ApplyStrategy
	// Gate, when set, limits the objects the controller works on to those
	// of this replica's active buckets (docs/scaling.md): keys of other
	// namespaces are not queued, and a sync starts only through
	// Gate.Begin. Default nil: every object.
	Gate Gate
	// Whole makes the controller cache its resources in every namespace
	// even while Informers holds a set of buckets (informer.Factory.Hold):
	// a controller that runs whole (a cluster-scoped parent, whose
	// children may be in any namespace; docs/scaling.md). Default false:
	// the informers hold what the Factory holds.
	Whole bool
	// RefuseApplyConflicts makes a server-side apply that would take a
	// field another manager owns fail with the conflict, instead of
	// taking it (the default, false, as metacontroller does).
	RefuseApplyConflicts bool
}

// DecodeSpec decodes a controller object into spec (a
// *v1alpha1.CompositeController, say), checks it with validate and checks
// its annotation that chooses how answers without their list are read
// (see validateAbsentListAnnotation), SyncedConditionAnnotation,
// RecordAnnotation and ApplyStrategyAnnotation. Any problem is an
// *InvalidSpecError. The spec is not defaulted.
func DecodeSpec[T any](object *unstructured.Unstructured, spec *T, validate func(*T) field.ErrorList, annotation string) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(object.Object, spec); err != nil {
		return &InvalidSpecError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}}
	}
	errs := validate(spec)
	errs = append(errs, validateAbsentListAnnotation(object.GetAnnotations(), annotation)...)
	errs = append(errs, validateSyncedConditionAnnotation(object.GetAnnotations())...)
	errs = append(errs, validateRecordAnnotation(object.GetAnnotations())...)
	errs = append(errs, validateApplyStrategyAnnotation(object.GetAnnotations())...)
	if len(errs) > 0 {
		return &InvalidSpecError{Errs: errs}
	}
	return nil
}
