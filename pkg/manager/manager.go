package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/controller"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	"github.com/metactl/metactl/pkg/rbac"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options configure a Manager.
type Options struct {
	// Config reaches the API server; its QPS and Burst bound every request.
	Config *rest.Config
	// Workers is the number of objects each controller syncs at once.
	Workers int
	// DiscoveryInterval is the period of discovery refreshes.
	DiscoveryInterval time.Duration
	// CacheResync is the informers' resync period; 0 disables it.
	CacheResync time.Duration
	// Hooks configure the hook client.
	Hooks hooks.Options
	// EventsQPS and EventsBurst set client-go's event spam filter: per
	// object, EventsBurst Events at once, then EventsQPS a second. Zero
	// keeps client-go's defaults (25, then one per 5 minutes).
	EventsQPS   float32
	EventsBurst int
	// LeaderElection, when set, runs controllers only while this replica
	// holds the Lease.
	LeaderElection *LeaderElection
	// MaxRetryDelay caps the backoff of a failing parent or controller
	// object: a hook that recovers is called again within this long.
	// Zero means loop.MaxRetryDelay (2 minutes).
	MaxRetryDelay time.Duration
	// CleanupTimeout bounds how long a deleted controller object waits
	// for its finalizer to be removed from its parents once removing it
	// failed; then the object goes anyway (see Manager.cleanup). Zero
	// means DefaultCleanupTimeout.
	CleanupTimeout time.Duration
}

// DefaultCleanupTimeout is Options.CleanupTimeout's default.
const DefaultCleanupTimeout = time.Minute

// ReasonCleanupFailed is the Ready condition's reason, and the Event's,
// while removing a deleted controller's finalizer from its parents fails;
// ReasonCleanupAbandoned is the Event's when the manager gives up.
const (
	ReasonCleanupFailed    = "CleanupFailed"
	ReasonCleanupAbandoned = "CleanupAbandoned"
)

// CleanupFinalizer is put on a CompositeController or DecoratorController
// that has a finalize hook, so that deleting it waits until metactl has
// removed the controller's finalizer from every object it manages.
const CleanupFinalizer = "metactl.io/cleanup"

// runner is what the manager runs for one controller object.
type runner interface {
	Start(ctx context.Context) error
	Stop()
	// Cleanup removes the controller's finalizer from every object; it
	// reports what it could not remove as *finalizer.RemainingError.
	Cleanup(ctx context.Context) error
	// HookCredentialError says why the hooks' credentials failed, if they did.
	HookCredentialError() error
	// Access lists what the controller must be allowed to do.
	Access() []rbac.Access
	// Failing holds the objects whose last sync failed.
	Failing() *controller.Failing
}

// kind is one kind of controller object the manager runs.
type kind struct {
	name     string // CompositeController, DecoratorController
	resource schema.GroupVersionResource
	// build validates the object and resolves its resources.
	build func(ctx context.Context, m *Manager, obj *unstructured.Unstructured) (runner, error)
	// informer watches the controller objects of this kind.
	informer *informer.Informer
}

var kinds = []*kind{
	{
		name:     "CompositeController",
		resource: v1alpha1.CompositeControllerResource,
		build: func(ctx context.Context, m *Manager, obj *unstructured.Unstructured) (runner, error) {
			c, err := composite.New(ctx, obj, composite.Options{Client: m.client, Objects: m.objects, Resources: m.resources, Informers: m.informers,
				Hooks: m.hooks, Recorder: m.recorder, Workers: m.opts.Workers, OnHealthChange: m.healthChanged("CompositeController", obj),
				RateLimiter: loop.NewRateLimiter(m.opts.MaxRetryDelay)})
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
		build: func(ctx context.Context, m *Manager, obj *unstructured.Unstructured) (runner, error) {
			c, err := decorator.New(ctx, obj, decorator.Options{Client: m.client, Objects: m.objects, Resources: m.resources, Informers: m.informers,
				Hooks: m.hooks, Recorder: m.recorder, Workers: m.opts.Workers, OnHealthChange: m.healthChanged("DecoratorController", obj),
				RateLimiter: loop.NewRateLimiter(m.opts.MaxRetryDelay)})
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	},
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

// Manager runs one controller per CompositeController and
// DecoratorController object.
type Manager struct {
	opts   Options
	client dynamic.Interface
	// objects lists, watches, creates and updates objects as
	// informer.Objects.
	objects *informer.RESTClient
	// httpClient is shared by every API client the manager builds.
	httpClient *http.Client
	// The typed clients metactl needs, and no others: a full clientset
	// would link every API group's client code into the binary.
	core          typedcorev1.CoreV1Interface
	coordination  coordinationv1client.CoordinationV1Interface
	authorization authorizationv1client.AuthorizationV1Interface
	resources     *discovery.ResourceMap
	informers     *informer.Factory
	hooks         *hooks.Client
	recorder      record.EventRecorder
	events        record.EventBroadcaster
	loop          *loop.Loop
	kinds         []*kind
	// credentials watches the Secrets and ConfigMaps hooks use.
	credentials *hooks.WatchingCredentialSource

	mu      sync.Mutex
	running map[string]*runningController // by queue key
	ready   bool
	// standby is true while this replica waits for the leader Lease.
	standby atomic.Bool
	// cleanups says, by queue key, where the cleanup of each deleted
	// controller object stands. Guarded by mu.
	cleanups map[string]cleanupState
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

type runningController struct {
	uid        types.UID
	generation int64
	controller runner
	// failing throttles the writes of its failing objects to its status.
	failing *failingStatus
}

// New returns a Manager; nothing runs until Run.
func New(opts Options) (*Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("manager: Options.Config is required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 32
	}
	if opts.CleanupTimeout <= 0 {
		opts.CleanupTimeout = DefaultCleanupTimeout
	}
	metrics.Register()
	opts.Config = rest.CopyConfig(opts.Config)
	opts.Config.Wrap(metrics.InstrumentTransport)
	if opts.Config.RateLimiter == nil && opts.Config.QPS > 0 {
		// One budget for every client built below: each would otherwise
		// get a token bucket of its own.
		opts.Config.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.Config.QPS, opts.Config.Burst)
	}
	httpClient, err := rest.HTTPClientFor(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("building the API server's HTTP client: %w", err)
	}
	client, err := dynamic.NewForConfigAndClient(opts.Config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	objects, err := informer.NewRESTClient(opts.Config, httpClient)
	if err != nil {
		return nil, err
	}
	discoveryClient, err := clientdiscovery.NewDiscoveryClientForConfigAndClient(opts.Config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the discovery client: %w", err)
	}
	core, err := typedcorev1.NewForConfigAndClient(opts.Config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the core/v1 client: %w", err)
	}
	coordination, err := coordinationv1client.NewForConfigAndClient(opts.Config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the coordination/v1 client: %w", err)
	}
	authorization, err := authorizationv1client.NewForConfigAndClient(opts.Config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the authorization/v1 client: %w", err)
	}
	if opts.Hooks.Metrics == nil {
		opts.Hooks.Metrics = hooks.ObserverFunc(metrics.ObserveHookCall)
	}
	// Hooks' CA bundles, client certificates and tokens come from the
	// Secrets and ConfigMaps they name, watched one by one.
	credentials := hooks.NewWatchingCredentialSource(hooks.CoreV1GetterFunc(func() typedcorev1.CoreV1Interface { return core }))
	if opts.Hooks.Transport == nil {
		transport := hooks.NewSecureTransport(credentials)
		opts.Hooks.Transport, opts.Hooks.PrepareRequest = transport, transport
	}
	m := &Manager{
		opts:          opts,
		client:        client,
		httpClient:    httpClient,
		objects:       objects,
		core:          core,
		coordination:  coordination,
		authorization: authorization,
		resources:     discovery.NewResourceMap(discoveryClient, discovery.Options{RefreshInterval: opts.DiscoveryInterval}),
		informers:     informer.NewFactory(objects.ListerWatcher, informer.Options{Resync: opts.CacheResync}),
		hooks:         hooks.NewClient(opts.Hooks),
		credentials:   credentials,
		events:        newEventBroadcaster(opts),
		running:       map[string]*runningController{},
		cleanups:      map[string]cleanupState{},
	}
	for _, k := range kinds {
		copied := *k
		m.kinds = append(m.kinds, &copied)
	}
	m.recorder = m.events.NewRecorder(eventScheme(), corev1.EventSource{Component: "metactl"})
	metrics.SetInformerCounter(m.informers.Counts)
	return m, nil
}

// eventScheme lets the recorder reference our own kinds; unstructured
// objects carry their own apiVersion and kind.
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Ready reports whether the manager watches controller objects with synced
// caches, or, under leader election, stands by ready to take over.
func (m *Manager) Ready() bool {
	if m.standby.Load() {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// Run runs the manager until ctx ends, then stops every controller, waiting
// for their in-flight syncs, and returns. Under leader election it runs the
// controllers only while it holds the Lease and returns ErrLeadershipLost,
// at once, when it loses it.
func (m *Manager) Run(ctx context.Context) error {
	if m.opts.LeaderElection != nil {
		return m.runElected(ctx, m.opts.LeaderElection)
	}
	return m.run(ctx)
}

func (m *Manager) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	m.events.StartStructuredLogging(4)
	m.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.core.Events("")})
	defer m.events.Shutdown()

	if err := m.resources.Start(ctx); err != nil {
		return fmt.Errorf("first discovery: %w", err)
	}
	m.loop = loop.New(loop.Options{
		Name:          "metactl-manager",
		Workers:       4,
		RateLimiter:   workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
		MaxRetryDelay: m.opts.MaxRetryDelay,
	}, m.reconcile)
	stopCRDWatch, err := m.refreshDiscoveryOnCRDChanges(ctx)
	if err != nil {
		return err
	}
	defer stopCRDWatch()

	var synced []cache.InformerSynced
	for _, k := range m.kinds {
		k.informer = m.informers.Acquire(k.resource)
		defer k.informer.Release()
		enqueue := func(obj any) {
			if u := informer.ObjectOf(obj); u != nil {
				m.loop.Add(queueKey(k, u.GetName()))
			}
		}
		if err := k.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			return err
		}
		synced = append(synced, k.informer.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("waiting for the controller objects' caches: %w", ctx.Err())
	}
	// A resource appearing or disappearing may let a waiting controller
	// start: look at every controller again. So may a rotated credential
	// mend a controller whose hooks failed for it.
	m.resources.Subscribe(m.enqueueAll)
	m.credentials.OnChange(func(string, string) { m.enqueueAll() })
	go m.credentials.Run(ctx)

	m.mu.Lock()
	m.ready = true
	m.mu.Unlock()
	logger.Info("Watching CompositeControllers and DecoratorControllers")

	m.loop.Start(ctx)
	<-ctx.Done()
	logger.Info("Shutting down: finishing in-flight syncs")
	m.loop.Stop()
	m.stopAll()
	logger.Info("Stopped")
	return nil
}

// refreshDiscoveryOnCRDChanges watches CRDs: one created or established
// changes what discovery serves. Bursts of CRD events coalesce into one
// refresh at a time.
func (m *Manager) refreshDiscoveryOnCRDChanges(ctx context.Context) (stop func(), err error) {
	// Metadata only: CRD schemas can be large, and any change of a CRD,
	// its status included, bumps its metadata's resourceVersion.
	client, err := metadata.NewForConfigAndClient(m.opts.Config, m.httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the metadata client: %w", err)
	}
	crds := metadatainformer.NewFilteredMetadataInformer(client, crdResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	requests := make(chan struct{}, 1)
	request := func(any) {
		select {
		case requests <- struct{}{}:
		default:
		}
	}
	if _, err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    request,
		UpdateFunc: func(_, obj any) { request(obj) },
		DeleteFunc: request,
	}); err != nil {
		return nil, err
	}
	stopInformer := make(chan struct{})
	go crds.Run(stopInformer)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-requests:
				if err := m.resources.Refresh(ctx); err != nil {
					klog.FromContext(ctx).V(2).Info("Refreshing discovery after a CRD change", "err", err)
				}
			}
		}
	}()
	return func() { close(stopInformer) }, nil
}

func queueKey(k *kind, name string) string { return k.name + "/" + name }

func (m *Manager) enqueueAll() {
	for _, k := range m.kinds {
		for _, obj := range k.informer.ListMeta("", nil) {
			m.loop.Add(queueKey(k, obj.GetName()))
		}
	}
}

// reconcile makes the running controller of one controller object match
// the object: started, restarted on a new generation, or stopped (after
// cleaning up its finalizers when the object is deleted).
func (m *Manager) reconcile(ctx context.Context, key string) (time.Duration, error) {
	kindName, name, _ := strings.Cut(key, "/")
	var k *kind
	for _, candidate := range m.kinds {
		if candidate.name == kindName {
			k = candidate
		}
	}
	if k == nil {
		return 0, nil
	}
	logger := klog.FromContext(ctx).WithValues(strings.ToLower(k.name), name)
	ctx = klog.NewContext(ctx, logger)
	obj, exists := k.informer.Get("", name)
	deleting := exists && obj.GetDeletionTimestamp() != nil

	m.mu.Lock()
	current := m.running[key]
	m.mu.Unlock()
	if current != nil && exists && !deleting && current.uid == obj.GetUID() && current.generation == obj.GetGeneration() {
		return 0, m.setRunning(ctx, k, obj, current)
	}
	if current != nil {
		if deleting || !exists {
			if err := m.cleanup(ctx, k, name, obj, current.uid, current.controller.Cleanup); err != nil {
				return 0, err
			}
		}
		logger.Info("Stopping controller", "generation", current.generation)
		current.controller.Stop()
		metrics.ControllerReady.DeleteLabelValues(k.name, name)
		m.mu.Lock()
		delete(m.running, key)
		m.mu.Unlock()
		if exists && !deleting {
			m.recorder.Eventf(obj, corev1.EventTypeNormal, "Stopped", "stopped generation %d to start generation %d", current.generation, obj.GetGeneration())
		}
	}
	if !exists {
		m.forgetCleanup(key)
		return 0, nil
	}
	if deleting {
		if current == nil && finalizer.Has(obj, CleanupFinalizer) {
			if err := m.cleanupWithoutController(ctx, k, obj); err != nil {
				return 0, err
			}
		}
		_, err := finalizer.Remove(ctx, m.client.Resource(k.resource), obj, CleanupFinalizer)
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return 0, err
	}
	if hasFinalizeHook(obj) {
		if _, err := finalizer.Add(ctx, m.client.Resource(k.resource), obj, CleanupFinalizer); err != nil {
			return 0, fmt.Errorf("adding finalizer %s: %w", CleanupFinalizer, err)
		}
	}

	c, err := k.build(ctx, m, obj)
	var invalid *controller.InvalidSpecError
	switch {
	case errors.As(err, &invalid):
		m.recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, err.Error())
		return 0, m.setReady(ctx, k, obj, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, err.Error())
	case discovery.IsNotFound(err):
		m.recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.ReasonUnknownResource, err.Error())
		if err := m.setReady(ctx, k, obj, metav1.ConditionFalse, v1alpha1.ReasonUnknownResource, err.Error()); err != nil {
			return 0, err
		}
		// A change in discovery requeues it at once (a CRD being
		// established triggers one); retries with backoff are the fallback.
		return 0, loop.ErrWaiting
	case err != nil:
		return 0, err
	}
	if denied, err := rbac.Denied(ctx, m.authorization.SelfSubjectAccessReviews(), c.Access()); err != nil {
		return 0, err
	} else if len(denied) > 0 {
		msg := "metactl may not " + strings.Join(denied, "; ") + " (grant it through the aggregated ClusterRole metactl-controllers)"
		m.recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.ReasonForbidden, msg)
		if err := m.setReady(ctx, k, obj, metav1.ConditionFalse, v1alpha1.ReasonForbidden, msg); err != nil {
			return 0, err
		}
		return 0, loop.ErrWaiting // RBAC is not watched: retried with backoff
	}
	started := &runningController{uid: obj.GetUID(), generation: obj.GetGeneration(), controller: c, failing: &failingStatus{}}
	c.Failing().OnChange(m.onFailingChange(key, started.failing))
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.Start(startCtx); err != nil {
		c.Stop()
		return 0, fmt.Errorf("starting: %w", err)
	}
	m.mu.Lock()
	m.running[key] = started
	m.mu.Unlock()
	metrics.ControllerReady.WithLabelValues(k.name, name).Set(1)
	m.recorder.Eventf(obj, corev1.EventTypeNormal, "Started", "started generation %d", obj.GetGeneration())
	return 0, m.setRunning(ctx, k, obj, started)
}

// healthChanged returns a callback that re-reconciles a controller object,
// to update its Ready condition.
func (m *Manager) healthChanged(kindName string, obj *unstructured.Unstructured) func() {
	key := kindName + "/" + obj.GetName()
	return func() { m.loop.Add(key) }
}

// hasFinalizeHook reports whether a controller object declares a finalize
// hook (the same field for both kinds).
func hasFinalizeHook(obj *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedMap(obj.Object, "spec", "hooks", "finalize")
	return found
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	running := m.running
	m.running = map[string]*runningController{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.controller.Stop()
		}()
	}
	wg.Wait()
}

// cleanupState is where the cleanup of a deleted controller object stands.
type cleanupState struct {
	uid types.UID
	// done: the finalizer is removed from its parents, or cleanup gave up.
	done bool
	// failingSince is when cleanup first failed; zero before.
	failingSince time.Time
	// err is the last attempt's error.
	err error
}

// cleanup removes a deleted controller object's finalizer from its parents
// with attempt (a runner's Cleanup, which stops syncing first). obj is nil
// when the object is gone already.
//
// A parent resource that is no longer served has no parents left: that is
// success. Any other failure (a 503 from an aggregated API, a forbidden
// list, ...) is reported on the object, a Ready=False CleanupFailed
// condition, a Warning Event and the log, and retried with the manager's
// backoff; but deleting a controller must not hang on an API that may
// never come back, so once Options.CleanupTimeout has passed since the
// first failure, cleanup gives up: a Warning Event names the resources
// whose objects may still carry the finalizer and how to remove it by
// hand, and cleanup returns nil so that the object goes. It returns an
// error to be retried otherwise.
func (m *Manager) cleanup(ctx context.Context, k *kind, name string, obj *unstructured.Unstructured, uid types.UID, attempt func(context.Context) error) error {
	key := queueKey(k, name)
	m.mu.Lock()
	state, ok := m.cleanups[key]
	if !ok || state.uid != uid {
		state = cleanupState{uid: uid}
	}
	m.mu.Unlock()
	if !state.done {
		state = m.tryCleanup(ctx, k, name, obj, state, attempt)
	}
	m.mu.Lock()
	m.cleanups[key] = state
	m.mu.Unlock()
	if !state.done {
		return fmt.Errorf("cleanup: %w", state.err)
	}
	return nil
}

// tryCleanup makes one attempt for cleanup and returns the new state.
func (m *Manager) tryCleanup(ctx context.Context, k *kind, name string, obj *unstructured.Unstructured, state cleanupState, attempt func(context.Context) error) cleanupState {
	err := attempt(ctx)
	state.err = err
	if err == nil {
		state.done = true
		return state
	}
	logger := klog.FromContext(ctx)
	ref := obj
	if ref == nil {
		// Gone already: Events still name it, by UID.
		ref = &unstructured.Unstructured{}
		ref.SetAPIVersion(k.resource.GroupVersion().String())
		ref.SetKind(k.name)
		ref.SetName(name)
		ref.SetUID(state.uid)
	}
	now := time.Now()
	first := state.failingSince.IsZero()
	if first {
		state.failingSince = now
	}
	deadline := state.failingSince.Add(m.opts.CleanupTimeout)
	if !now.Before(deadline) {
		state.done = true
		msg := fmt.Sprintf("gave up removing this controller's finalizer from its parents after %v: %v. %s",
			m.opts.CleanupTimeout, err, manualRemoval(finalizer.Remaining(err)))
		logger.Error(err, "Gave up removing the deleted controller's finalizer; its parents may still carry it", "after", m.opts.CleanupTimeout)
		m.recorder.Event(ref, corev1.EventTypeWarning, ReasonCleanupAbandoned, msg)
		return state
	}
	if first {
		// Reported once: the condition's write would otherwise re-queue
		// the object at once whenever the error's text changes. The log
		// has every failure.
		msg := fmt.Sprintf("removing this controller's finalizer from its parents failed (retrying until %s, then the %s goes anyway): %v",
			deadline.UTC().Format(time.RFC3339), k.name, err)
		m.recorder.Event(ref, corev1.EventTypeWarning, ReasonCleanupFailed, msg)
		if obj != nil {
			if err := m.setReady(ctx, k, obj, metav1.ConditionFalse, ReasonCleanupFailed, msg); err != nil {
				logger.Error(err, "Reporting the failed cleanup")
			}
		}
	}
	// The backoff may outlast the deadline: come back by then at the latest.
	m.loop.AddAfter(queueKey(k, name), deadline.Sub(now))
	return state
}

// cleanupWithoutController cleans up for a deleted controller object that
// no controller runs for: metactl restarted (or took over the leader
// Lease) while it was being deleted, or it never started. A controller is
// built for the purpose and never started. One that cannot be built, for
// its spec or for a resource that is not served, is not looked for: when
// the unserved resource is the parent's there is nothing to remove, and in
// the other cases (rare: a spec the API server accepted but metactl
// refuses, a child resource gone) the log says that finalizers may remain.
// Other failures are cleanup's.
func (m *Manager) cleanupWithoutController(ctx context.Context, k *kind, obj *unstructured.Unstructured) error {
	return m.cleanup(ctx, k, obj.GetName(), obj, obj.GetUID(), func(ctx context.Context) error {
		c, err := k.build(ctx, m, obj)
		var invalid *controller.InvalidSpecError
		switch {
		case errors.As(err, &invalid) || discovery.IsNotFound(err):
			klog.FromContext(ctx).Info("Not looking for this deleted controller's finalizer on its parents: it cannot be built; unless its parent resource is not served, they may still carry it", "reason", err)
			return nil
		case err != nil:
			return fmt.Errorf("building the controller to clean up: %w", err)
		}
		defer c.Stop()
		return c.Cleanup(ctx)
	})
}

func (m *Manager) forgetCleanup(key string) {
	m.mu.Lock()
	delete(m.cleanups, key)
	m.mu.Unlock()
}

// manualRemoval tells how to remove a finalizer by hand from the objects of
// each resource that may still carry it.
func manualRemoval(remaining []*finalizer.RemainingError) string {
	var parts []string
	for _, r := range remaining {
		resource := r.Resource.Resource
		if r.Resource.Group != "" {
			resource += "." + r.Resource.Version + "." + r.Resource.Group
		}
		parts = append(parts, fmt.Sprintf("Objects of %s may still carry finalizer %s: list them with "+
			"'kubectl get %s -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FINALIZERS:.metadata.finalizers' "+
			"and remove it from each one's metadata.finalizers (kubectl edit).", resource, r.Finalizer, resource))
	}
	return strings.Join(parts, " ")
}
