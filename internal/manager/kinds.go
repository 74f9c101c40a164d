package manager

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// runner is what the manager runs for one controller object.
type runner interface {
	Start(ctx context.Context) error
	Stop()
	// Cleanup stops the controller's syncs and removes its finalizer from
	// every object; it reports what it could not remove as
	// *finalizer.RemainingError.
	Cleanup(ctx context.Context) error
	// HookCredentialError says why the hooks' credentials failed, if they did.
	HookCredentialError() error
	// Access lists what the controller must be allowed to do.
	Access() []rbac.Access
	// Failing holds the objects whose last sync failed.
	Failing() *engine.Failing
	// Explain adds what the controller knows of an object to an answer
	// of `metactl explain`.
	Explain(a *explain.Answer)
	// HookResources are the resources of the objects its hook calls carry.
	HookResources() []schema.GroupVersionResource
	// EnqueueAdmitted queues every cached object its Gate admits now,
	// and ForgetNotAdmitted forgets what it knows of the others: the
	// buckets this replica took, and gave up (sharding.go).
	EnqueueAdmitted(t trigger.Trigger)
	ForgetNotAdmitted()
	// ParentNamespaces calls f with the namespace of each of its cached
	// parents (metactl_shard_bucket_parents).
	ParentNamespaces(f func(namespace string))
}

// kind is one kind of controller object the manager runs.
type kind struct {
	name     string // CompositeController, DecoratorController
	resource schema.GroupVersionResource
	// build validates the object and resolves its resources.
	build func(ctx context.Context, obj *unstructured.Unstructured, opts engine.Options) (runner, error)
	// informer watches the controller objects of this kind.
	informer *informer.Informer
}

var kinds = []*kind{
	{
		name:     "CompositeController",
		resource: v1alpha1.CompositeControllerResource,
		build: func(ctx context.Context, obj *unstructured.Unstructured, opts engine.Options) (runner, error) {
			c, err := composite.New(ctx, obj, opts)
			if err != nil {
				return nil, err
			}
			logIgnoredFields(ctx, obj)
			return c, nil
		},
	},
	{
		name:     "DecoratorController",
		resource: v1alpha1.DecoratorControllerResource,
		build: func(ctx context.Context, obj *unstructured.Unstructured, opts engine.Options) (runner, error) {
			c, err := decorator.New(ctx, obj, opts)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	},
}

// build builds the controller of obj, a controller object of kind k, on
// the manager's shared clients, cache and hook client; it does not start
// it. whole: it runs whole (sharding.go). Each controller records its
// Events through a pipeline of its own (controllerEvents), stopped with
// it, and shares the manager's turns to run (Options.Active). A
// controller object that names
// a ServiceAccount (rbac.ServiceAccountAnnotation) gets that account's
// clients for its writes and uncached reads, and is an *accountRunner;
// Stop releases them.
func (m *Manager) build(ctx context.Context, k *kind, obj *unstructured.Unstructured, whole bool) (runner, error) {
	events := m.newControllerEvents()
	c, err := m.buildWith(ctx, k, obj, whole, events.recorder)
	if err != nil {
		events.stop()
		return nil, err
	}
	if a, ok := c.(*accountRunner); ok {
		a.runner = &eventsRunner{runner: a.runner, events: events}
		return a, nil
	}
	return &eventsRunner{runner: c, events: events}, nil
}

// buildWith is build with the controller's Event recorder.
func (m *Manager) buildWith(ctx context.Context, k *kind, obj *unstructured.Unstructured, whole bool, recorder record.EventRecorder) (runner, error) {
	opts := engine.Options{Client: m.client, Objects: m.objects, Resources: m.resources, Informers: m.informers,
		Hooks: m.hooks, Recorder: recorder, Workers: m.opts.Workers, Share: m.share, MinResyncAfter: m.opts.MinResyncAfter,
		OnHealthChange: m.healthChanged(k.name, obj),
		RateLimiter:    loop.NewRateLimiter[engine.Key](m.opts.MaxRetryDelay), MaxRelatedObjects: m.opts.MaxRelatedObjects,
		MaxRequestBytes: m.opts.MaxRequestBytes, Requests: m.requests, MaxRelatedRules: m.opts.MaxRelatedRules,
		MaxResources:    m.opts.MaxControllerResources,
		StopGracePeriod: m.opts.StopGracePeriod, History: m.history, SyncedCondition: m.opts.SyncedCondition,
		Record: m.opts.Record, RecordAll: m.opts.RecordAll,
		ApplyStrategy: m.opts.ApplyStrategy, RefuseApplyConflicts: m.opts.RefuseApplyConflicts,
		// The syncs' spans come from the tracer of the hook calls'.
		Tracer: m.opts.Hooks.Tracer,
		// Sharded, the objects of this replica's buckets, or every one
		// on the holder of the cluster bucket (sharding.go).
		Gate: m.gateOf(whole), Whole: whole}
	sa, err := rbac.ServiceAccountOf(obj)
	if err != nil {
		path := field.NewPath("metadata", "annotations").Key(rbac.ServiceAccountAnnotation)
		return nil, &engine.InvalidSpecError{Errs: field.ErrorList{field.Invalid(path, obj.GetAnnotations()[rbac.ServiceAccountAnnotation], err.Error())}}
	}
	if sa == nil {
		return k.build(ctx, obj, opts)
	}
	account, release, err := m.acquireAccount(*sa)
	if err != nil {
		return nil, err
	}
	opts.Client, opts.Objects, opts.Self = account.client, account.objects, m.client
	// Related resources are checked as the sync declares them; RBAC is
	// not watched, so an answer holds for Options.AccountReviewTTL.
	reviewer := &rbac.CachedReviewer{Review: sa.Reviewer(m.authorization.SubjectAccessReviews()), TTL: m.accountReviewTTL()}
	opts.MayRead = func(ctx context.Context, res *discovery.Resource, namespace string) error {
		denied, err := rbac.DeniedBy(ctx, reviewer.Ask, []rbac.Access{{Resource: res, Namespace: namespace, Verbs: rbac.CacheVerbs}})
		if err != nil {
			return err
		}
		if len(denied) > 0 {
			return &rbac.ForbiddenError{Account: *sa, Denied: denied}
		}
		return nil
	}
	// The reads of a controller whose objects are all namespaced are
	// checked per namespace, as its objects are synced (rbac.BeforeStart
	// leaves them out of the check before it starts): what the account
	// may not read is not served to it. access is set once built, before
	// the controller starts and so before any sync asks.
	var access []rbac.Access
	opts.MayServe = func(ctx context.Context, namespace string) error {
		if !rbac.PerNamespace(access) {
			return nil
		}
		denied, err := rbac.DeniedBy(ctx, reviewer.Ask, rbac.InNamespace(access, namespace))
		if err != nil {
			return err
		}
		if len(denied) > 0 {
			return &rbac.ForbiddenError{Account: *sa, Denied: denied, Hint: "a controller acting as a ServiceAccount is served only the namespaces its account may read: grant them to " +
				sa.UserName() + " with a Role and RoleBinding in namespace " + namespace}
		}
		return nil
	}
	c, err := k.build(ctx, obj, opts)
	if err != nil {
		release()
		return nil, err
	}
	access = c.Access()
	return &accountRunner{runner: c, account: *sa, release: release, credentials: credentialAccess(k, obj)}, nil
}

// accountReviewTTL is the default of Options.AccountReviewTTL: how long
// the answers about a controller's ServiceAccount hold.
const accountReviewTTL = time.Minute

// accountReviewTTL is Options.AccountReviewTTL, defaulted.
func (m *Manager) accountReviewTTL() time.Duration {
	if m.opts.AccountReviewTTL > 0 {
		return m.opts.AccountReviewTTL
	}
	return accountReviewTTL
}

// accountRunner is a controller that acts as a ServiceAccount.
type accountRunner struct {
	runner
	account rbac.ServiceAccount
	release func()
	// credentials is the reading of its hooks' credential Secrets and
	// ConfigMaps, which the account must be allowed too.
	credentials []rbac.Access
}

// Stop stops the controller and releases the account's clients.
func (r *accountRunner) Stop() {
	r.runner.Stop()
	r.release()
}

// logIgnoredFields logs the fields of a valid CompositeController object
// that metactl accepts and does not act on, as metacontroller does not.
func logIgnoredFields(ctx context.Context, obj *unstructured.Unstructured) {
	var cc v1alpha1.CompositeController
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cc) != nil {
		return
	}
	if ignored := cc.Spec.IgnoredFields(); len(ignored) > 0 {
		klog.FromContext(ctx).Info("Ignoring fields that metacontroller accepts and never acts on", "fields", ignored)
	}
}

// hasFinalizeHook reports whether a controller object declares a finalize
// hook (the same field for both kinds).
func hasFinalizeHook(obj *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedMap(obj.Object, "spec", "hooks", "finalize")
	return found
}

// queueKey names a controller object in the manager's queue: its kind,
// then its name (controller objects are cluster-scoped).
func queueKey(kindName, name string) string { return kindName + "/" + name }
