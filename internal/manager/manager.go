package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	hookcreds "github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Options configure a Manager.
type Options struct {
	// Config reaches the API server. A positive QPS (with Burst), or a
	// RateLimiter, is a fixed limit on the rate of every request metactl
	// makes; without either there is none (not client-go's default of 5).
	// Whatever it says, the requests in flight are capped by the server's
	// 429 answers (internal/throttle). Its UserAgent is kept when it
	// starts with "metactl/", else prefixed with it (metactl/<module
	// version> when empty): the field manager of the children's
	// client-side writes is "metactl" in metactl run and metactl dev
	// alike (children.ClientSideManager).
	Config *rest.Config
	// Workers is the most objects each controller syncs at once; 0 means
	// loop.DefaultWorkers.
	Workers int
	// Active is the most syncs of all controllers together that run at
	// once outside a wait on a hook (decoding, checking answers,
	// writing), shared fairly between the controllers (loop.Share: a
	// freed turn goes to the controller holding the fewest); each
	// controller may use all of them when the others do not. 0 means
	// loop.DefaultActive() (8 per CPU, at least 32), as many as one
	// controller may use, so that one controller alone runs as fast as
	// before there was a cap.
	Active int
	// MinResyncAfter is the shortest delay a hook's resyncAfterSeconds
	// gets (engine.Options.MinResyncAfter); 0 means
	// engine.DefaultMinResyncAfter (1s).
	MinResyncAfter time.Duration
	// DiscoveryInterval is the period of discovery refreshes; 0 means
	// the discovery package's default (30s), also metactl run's
	// (--discovery-interval).
	DiscoveryInterval time.Duration
	// CacheResync is the informers' resync period; 0 disables it.
	CacheResync time.Duration
	// Hooks configure the hook client, shared by all controllers: its
	// ResponseBudgetBytes (default hookclient.DefaultResponseBudgetBytes, 32
	// MiB; plus ResponseFloorBytes, default 256 KiB, per controller
	// reading an answer) and EtagCacheMaxBytes (default
	// hookclient.DefaultEtagCacheMaxBytes, 32 MiB) bound the whole process.
	Hooks hookclient.Options
	// MaxRelatedObjects is the most related objects the customize hook's
	// rules may select for one parent; 0 means related.DefaultMaxObjects
	// (10,000).
	MaxRelatedObjects int
	// MaxRequestBytes is the most bytes of objects (children or
	// attachments, adopted orphans included, related objects) one sync's
	// hook requests may carry, counted before decoding; 0 means
	// engine.DefaultMaxRequestBytes (16 MiB).
	MaxRequestBytes int64
	// RequestBudgetBytes bounds those bytes held by the syncs of all
	// controllers at once, one controller at most half; 0 means
	// engine.DefaultRequestBudgetBytes (32 MiB).
	RequestBudgetBytes int64
	// MaxRelatedRules is the most rules one customize answer may
	// declare; 0 means related.DefaultMaxRules (100).
	MaxRelatedRules int
	// MaxControllerResources is the most distinct resources one
	// controller may watch, its spec's and its customize answers'
	// together; 0 means engine.DefaultMaxResources (32).
	MaxControllerResources int
	// EventsQPS and EventsBurst set client-go's event spam filter: per
	// object, EventsBurst Events at once, then EventsQPS a second. Zero
	// keeps client-go's defaults (25, then one per 5 minutes).
	EventsQPS   float32
	EventsBurst int
	// EventSourceComponent is the source component of every Event metactl
	// records (an Event's source.component and reportingController, the
	// SOURCE column of kubectl get events). Empty means
	// DefaultEventSourceComponent ("metactl"); metactl run sets it from
	// --event-source-component. "metacontroller" keeps event filters and
	// alerts written for metacontroller's Events matching.
	EventSourceComponent string
	// LeaderElection, when set, runs controllers only while this replica
	// holds the Lease (with ShardBuckets, every replica runs them and the
	// Lease decides which writes the controller objects). New gives its
	// unset fields their defaults, and its Identity is sent with every
	// hook call (Hooks.Replica, unless set).
	LeaderElection *LeaderElection
	// ShardBuckets, when positive, shares the parents among the replicas
	// in this many buckets of namespaces (docs/scaling.md), the same
	// number on every replica, at most shard.MaxBuckets; it needs
	// LeaderElection, whose namespace, Lease name, identity and durations
	// the buckets' Leases use. Zero (the default): this replica works on
	// every parent.
	ShardBuckets int
	// MaxRetryDelay caps the backoff of a failing parent or controller
	// object: a hook that recovers is called again within this long.
	// Zero means loop.MaxRetryDelay (2 minutes).
	MaxRetryDelay time.Duration
	// CredentialNamespaces are the namespaces whose Secrets and
	// ConfigMaps hooks may name for their caBundle, clientTLS,
	// authorization and basicAuth; "*" (hookcreds.AllNamespaces) allows every
	// namespace, as metacontroller does. A hook given as a Service may
	// always name its Service's namespace. Default (nil): only that.
	// metactl run sets it from --credential-namespaces (default: its own
	// namespace).
	CredentialNamespaces []string
	// AllowInsecureCredentials lets hooks called over plain http use
	// authorization, basicAuth and clientTLS. Default false: such a
	// controller does not start (Ready=False InsecureCredentials).
	AllowInsecureCredentials bool
	// CleanupTimeout bounds how long a deleted controller object waits
	// for its finalizer to be removed from its parents once removing it
	// failed; then the object goes anyway (see Manager.cleanup). Zero
	// means DefaultCleanupTimeout.
	CleanupTimeout time.Duration
	// StartTimeout bounds a controller's start-up (its caches' first
	// sync, in the background); past it the controller object is
	// Ready=False StartFailed and the start is tried again with backoff.
	// Zero means DefaultStartTimeout (2 minutes).
	StartTimeout time.Duration
	// StopGracePeriod is the longest that stopping a controller (on
	// shutdown, a spec change, the object's deletion) waits for its
	// syncs in flight, once it has cancelled them (their hook calls end,
	// they write nothing more); syncs still running then are abandoned
	// and logged. Zero means loop.DefaultStopGracePeriod (10s).
	StopGracePeriod time.Duration
	// RequireServiceAccount refuses to run a controller object without
	// the annotation rbac.ServiceAccountAnnotation (Ready=False
	// Forbidden), so that every controller's writes are its own
	// ServiceAccount's. Default false: a controller without it writes as
	// metactl.
	RequireServiceAccount bool
	// SyncedCondition writes the metactl.io/Synced condition on the
	// objects of every controller, except those whose object is annotated
	// engine.SyncedConditionAnnotation "false". Default false: only
	// controllers annotated "true" write it, as status belongs to the
	// hook. metactl run sets it from --synced-condition.
	SyncedCondition bool
	// HistoryMaxBytes is the memory budget of the record of each
	// object's last syncs (why each ran, its hook calls and writes, its
	// outcome), all controllers together, that Manager.History serves
	// (metactl explain): past it, the objects synced longest ago are
	// dropped, those whose newest sync succeeded first. Zero (or
	// negative) records nothing (no record is allocated per sync), as
	// --history-max-bytes=0 does; DefaultHistoryMaxBytes (4 MiB) is the
	// default of metactl run, which sets it from --history-max-bytes.
	HistoryMaxBytes int64
	// AccountReviewTTL is how long an answer about a controller's
	// ServiceAccount holds, RBAC not being watched: a running controller
	// that acts as one has its access checked again once per this period
	// and is stopped (Ready=False Forbidden) when it is refused, and the
	// answer about a related resource is reused for as long. Zero means
	// one minute. metactl run does not set it.
	AccountReviewTTL time.Duration
	// Record, when set, keeps the hook calls of the controllers that
	// record: those annotated engine.RecordAnnotation "true", or,
	// with RecordAll, every one not annotated "false". It becomes
	// Hooks.Tap. Default nil: nothing is recorded, whatever the
	// annotation says. metactl run always sets one (bounded by
	// --record-max-calls and --record-max-bytes).
	Record *hookrecord.Recorder
	// RecordAll records every controller's hook calls but those of
	// controllers annotated engine.RecordAnnotation "false". Default
	// false. metactl run sets it with --record-dir, as metactl dev does.
	RecordAll bool
	// ApplyStrategy is how the controllers whose object has no
	// engine.ApplyStrategyAnnotation write their children; "" (the
	// default) is engine.ApplyClientSide. metactl run sets it from
	// --apply-strategy.
	ApplyStrategy engine.ApplyStrategy
	// RefuseApplyConflicts: see engine.Options.RefuseApplyConflicts.
	// Default false. metactl run sets it from --refuse-apply-conflicts.
	RefuseApplyConflicts bool
}

// Manager runs one controller per CompositeController and
// DecoratorController object.
type Manager struct {
	opts Options
	// history is the record of syncs every controller adds to; nil
	// when disabled.
	history *history.Store
	clients
	resources *discovery.ResourceMap
	informers *informer.Factory
	hooks     *hookclient.Client
	// requests bounds the bytes of objects all controllers' syncs hold
	// for their hook requests (Options.RequestBudgetBytes).
	requests *engine.RequestBudget
	// recorder records the manager's own Events (on controller objects),
	// through events; each controller has a pipeline of its own
	// (controllerEvents).
	recorder record.EventRecorder
	events   record.EventBroadcaster
	// share is the turns to run that every controller shares
	// (Options.Active).
	share *loop.Share
	loop  *loop.Loop[string]
	kinds []*kind
	// sharding shares the parents among replicas; nil when not sharded
	// (Options.ShardBuckets).
	sharding *sharding
	// credentials watches the Secrets and ConfigMaps hooks use.
	credentials *hookcreds.WatchingCredentialSource

	mu      sync.Mutex
	running map[string]*runningController // by queue key
	// stopping is set once Run stops its controllers: none starts then.
	stopping bool
	ready    bool
	// standby is true while this replica waits for the leader Lease.
	standby atomic.Bool
	// cleanups says, by queue key, where the cleanup of each deleted
	// controller object stands. Guarded by mu.
	cleanups map[string]cleanupState
	// startFailures are, by queue key, the controllers whose start-up
	// failed (StartFailed) and when each may start again. Guarded by mu.
	startFailures map[string]*startFailure

	// accounts are the clients of the ServiceAccounts controllers act as
	// (rbac.ServiceAccountAnnotation), while a controller uses them.
	accountsMu sync.Mutex
	accounts   map[rbac.ServiceAccount]*accountClients
}

// DefaultHistoryMaxBytes is the budget of the record of syncs
// (Options.HistoryMaxBytes) that metactl run keeps unless told otherwise
// (--history-max-bytes): history.DefaultMaxBytes, 4 MiB.
const DefaultHistoryMaxBytes = history.DefaultMaxBytes

// New returns a Manager; nothing runs until Run.
func New(opts Options) (*Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("manager: Options.Config is required")
	}
	if opts.CleanupTimeout <= 0 {
		opts.CleanupTimeout = DefaultCleanupTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	metrics.Register()
	c, err := newClients(opts.Config)
	if err != nil {
		return nil, err
	}
	if opts.Hooks.Metrics == nil {
		opts.Hooks.Metrics = hookclient.ObserverFunc(metrics.ObserveHookCall)
	}
	if opts.Record != nil {
		opts.Hooks.Tap = opts.Record
	}
	// With leader election, every hook call names this replica
	// (Metactl-Replica), so a hook can tell which process called it; the
	// identity is the Lease holder's, defaulted here rather than in Run so
	// that the hook client has it. Without, there is one process and no
	// identity: no header.
	if le := opts.LeaderElection; le != nil {
		setElectionDefaults(le)
		if opts.Hooks.Replica == "" {
			opts.Hooks.Replica = le.Identity
		}
	}
	// Hooks' CA bundles, client certificates and tokens come from the
	// Secrets and ConfigMaps they name, watched one by one.
	credentials := hookcreds.NewWatchingCredentialSource(hookcreds.CoreV1GetterFunc(func() typedcorev1.CoreV1Interface { return c.core }))
	if opts.Hooks.Transport == nil {
		transport := hookcreds.NewSecureTransport(credentials, opts.credentialPolicy())
		opts.Hooks.Transport, opts.Hooks.PrepareRequest = transport, transport
	}
	informerOptions := informer.Options{Resync: opts.CacheResync}
	var m *Manager
	if opts.ShardBuckets > 0 {
		// Only a Factory told the resources' scopes filters them by bucket.
		informerOptions.Namespaced = func(gvr schema.GroupVersionResource) bool { return m.namespaced(gvr) }
	}
	m = &Manager{
		opts:          opts,
		clients:       c,
		resources:     discovery.NewResourceMap(c.discovery, discovery.Options{RefreshInterval: opts.DiscoveryInterval}),
		informers:     informer.NewFactory(c.objects.ListerWatcher, informerOptions),
		hooks:         hookclient.NewClient(opts.Hooks),
		credentials:   credentials,
		events:        newEventBroadcaster(opts),
		share:         loop.NewShare(opts.Active),
		running:       map[string]*runningController{},
		cleanups:      map[string]cleanupState{},
		startFailures: map[string]*startFailure{},
		accounts:      map[rbac.ServiceAccount]*accountClients{},
	}
	if opts.HistoryMaxBytes > 0 {
		m.history = history.NewStore(history.StoreOptions{MaxBytes: opts.HistoryMaxBytes})
	}
	for _, k := range kinds {
		copied := *k
		m.kinds = append(m.kinds, &copied)
	}
	if m.sharding, err = m.newSharding(opts); err != nil {
		return nil, err
	}
	m.recorder = m.events.NewRecorder(eventScheme(), corev1.EventSource{Component: opts.eventSourceComponent()})
	metrics.SetInformerCounter(m.informers.Counts)
	metrics.SetWatchEventCounter(m.informers.WatchEvents)
	if m.sharding != nil {
		metrics.SetShardFilterModes(m.informers.FilterModes)
		metrics.SetShardBucketCounts(m.informers.BucketCounts)
		metrics.SetShardBucketParents(m.parentsPerBucket)
	}
	metrics.SetHookResponseBytesInFlight(m.hooks.ResponseBytesInFlight)
	metrics.SetHookDecodedBytesInUse(m.hooks.DecodedBytesInUse)
	m.requests = engine.NewRequestBudget(opts.RequestBudgetBytes, 0)
	metrics.SetHookRequestBytesInFlight(m.requests.InFlight)
	return m, nil
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

// Run runs the manager until ctx ends, then stops every controller,
// cancelling their in-flight syncs and waiting for them at most
// Options.StopGracePeriod, and returns. Under leader election it runs the
// controllers only while it holds the Lease and returns ErrLeadershipLost,
// at once, when it loses it.
func (m *Manager) Run(ctx context.Context) error {
	if m.sharding != nil {
		return m.runSharded(ctx, m.opts.LeaderElection)
	}
	if m.opts.LeaderElection != nil {
		return m.runElected(ctx, m.opts.LeaderElection)
	}
	// Without leader election this process runs the controllers: as far
	// as metrics.Leader tells, it leads.
	metrics.Leader.Set(1)
	defer metrics.Leader.Set(0)
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
	m.loop = loop.New(loop.Options[string]{
		Name:            "metactl-manager",
		Workers:         4,
		RateLimiter:     workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
		MaxRetryDelay:   m.opts.MaxRetryDelay,
		StopGracePeriod: m.opts.StopGracePeriod,
	}, func(ctx context.Context, s *loop.Sync[string]) (time.Duration, error) { return m.reconcile(ctx, s.Key) })
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
				m.loop.AddFor(queueKey(k.name, u.GetName()), trigger.Trigger{Cause: trigger.CauseObject, Generation: u.GetGeneration()})
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

	if err := m.holdNoBucket(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	m.ready = true
	m.mu.Unlock()
	logger.Info("Watching CompositeControllers and DecoratorControllers")

	m.loop.Start(ctx)
	waitCoordinator := m.runCoordinator(ctx)
	<-ctx.Done()
	logger.Info("Shutting down: cancelling in-flight syncs", "grace", m.stopGracePeriod())
	// The manager's own reconciles and every controller stop at once, so
	// that shutdown takes at most one grace period.
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.loop.Stop()
	}()
	m.stopAll()
	<-stopped
	waitCoordinator() // buckets drained and released
	logger.Info("Stopped")
	return nil
}

// stopGracePeriod is Options.StopGracePeriod, defaulted.
func (m *Manager) stopGracePeriod() time.Duration {
	if m.opts.StopGracePeriod > 0 {
		return m.opts.StopGracePeriod
	}
	return loop.DefaultStopGracePeriod
}

// History returns the record of the syncs of every controller, nil when
// disabled (Options.HistoryMaxBytes): the last syncs of each object, by
// history.ControllerID and work-queue key (see engine.Engine.History).
func (m *Manager) History() *history.Store { return m.history }
