package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options configure a Manager.
type Options struct {
	// Config reaches the API server; its QPS and Burst bound every request.
	Config *rest.Config
	// Workers is the number of parents each controller syncs at once.
	Workers int
	// DiscoveryInterval is the period of discovery refreshes.
	DiscoveryInterval time.Duration
	// CacheResync is the informers' resync period; 0 disables it.
	CacheResync time.Duration
	// Hooks configure the hook client.
	Hooks hooks.Options
}

// errWaiting marks a controller that waits for something outside it, such
// as a resource not yet served: it is retried with backoff, without logging
// an error each time (its condition says what it waits for).
var errWaiting = errors.New("waiting")

// Manager runs one controller per CompositeController object.
type Manager struct {
	opts      Options
	client    dynamic.Interface
	kube      kubernetes.Interface
	resources *discovery.ResourceMap
	informers *informer.Factory
	hooks     *hooks.Client
	recorder  record.EventRecorder
	events    record.EventBroadcaster
	queue     workqueue.TypedRateLimitingInterface[string]
	ccs       *informer.Informer

	mu      sync.Mutex
	running map[string]*runningController
	ready   bool
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

type runningController struct {
	uid        types.UID
	generation int64
	controller *composite.Controller
}

// New returns a Manager; nothing runs until Run.
func New(opts Options) (*Manager, error) {
	if opts.Config == nil {
		return nil, errors.New("manager: Options.Config is required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 32
	}
	metrics.Register()
	client, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("building the clientset: %w", err)
	}
	if opts.Hooks.Metrics == nil {
		opts.Hooks.Metrics = hooks.ObserverFunc(metrics.ObserveHookCall)
	}
	m := &Manager{
		opts:      opts,
		client:    client,
		kube:      kube,
		resources: discovery.NewResourceMap(kube.Discovery(), discovery.Options{RefreshInterval: opts.DiscoveryInterval}),
		informers: informer.NewFactory(client, informer.Options{Resync: opts.CacheResync}),
		hooks:     hooks.NewClient(opts.Hooks),
		events:    record.NewBroadcaster(),
		running:   map[string]*runningController{},
	}
	m.recorder = m.events.NewRecorder(eventScheme(), corev1.EventSource{Component: "metactl"})
	return m, nil
}

// eventScheme lets the recorder reference our own kinds; unstructured
// parents carry their own apiVersion and kind.
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// Ready reports whether the manager watches CompositeControllers with a
// synced cache.
func (m *Manager) Ready() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready
}

// Run runs the manager until ctx ends, then stops every controller, waiting
// for their in-flight syncs, and returns.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	m.events.StartStructuredLogging(4)
	m.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.kube.CoreV1().Events("")})
	defer m.events.Shutdown()

	if err := m.resources.Start(ctx); err != nil {
		return fmt.Errorf("first discovery: %w", err)
	}
	m.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "compositecontrollers"})
	// A resource appearing or disappearing may let a waiting controller
	// start, or stop one: look at every controller again.
	m.resources.Subscribe(m.enqueueAll)

	// A CRD created or established changes what discovery serves.
	crds := m.informers.Acquire(crdResource)
	defer crds.Release()
	// Bursts of CRD events (the initial list, status updates) coalesce
	// into one refresh at a time.
	refreshRequests := make(chan struct{}, 1)
	refreshDiscovery := func(any) {
		select {
		case refreshRequests <- struct{}{}:
		default:
		}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-refreshRequests:
				if err := m.resources.Refresh(ctx); err != nil {
					logger.V(2).Info("Refreshing discovery after a CRD change", "err", err)
				}
			}
		}
	}()
	if err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    refreshDiscovery,
		UpdateFunc: func(_, obj any) { refreshDiscovery(obj) },
		DeleteFunc: refreshDiscovery,
	}); err != nil {
		return err
	}

	m.ccs = m.informers.Acquire(v1alpha1.CompositeControllerResource)
	defer m.ccs.Release()
	if err := m.ccs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.enqueueObject(obj) },
		UpdateFunc: func(_, obj any) { m.enqueueObject(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			m.enqueueObject(obj)
		},
	}); err != nil {
		return err
	}
	if !cache.WaitForCacheSync(ctx.Done(), m.ccs.HasSynced) {
		return fmt.Errorf("waiting for the CompositeController cache: %w", ctx.Err())
	}
	m.mu.Lock()
	m.ready = true
	m.mu.Unlock()
	logger.Info("Watching CompositeControllers")

	var workers sync.WaitGroup
	for range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for m.processNextWorkItem(ctx) {
			}
		}()
	}
	<-ctx.Done()
	logger.Info("Shutting down: finishing in-flight syncs")
	m.queue.ShutDown()
	workers.Wait()
	m.stopAll()
	logger.Info("Stopped")
	return nil
}

func (m *Manager) enqueueObject(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m.queue.Add(u.GetName())
	}
}

func (m *Manager) enqueueAll() {
	for _, obj := range m.ccs.List("", nil) {
		m.queue.Add(obj.GetName())
	}
}

func (m *Manager) processNextWorkItem(ctx context.Context) bool {
	name, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(name)
	retry, err := m.reconcile(ctx, name)
	switch {
	case errors.Is(err, errWaiting):
		m.queue.AddRateLimited(name)
	case err != nil:
		klog.FromContext(ctx).Error(err, "Reconciling compositecontroller", "compositecontroller", name)
		m.queue.AddRateLimited(name)
	case retry > 0:
		m.queue.Forget(name)
		m.queue.AddAfter(name, retry)
	default:
		m.queue.Forget(name)
	}
	return true
}

// reconcile makes the running controller of name match its object: started,
// restarted on a new generation, or stopped. It returns a delay after
// which to look again, for controllers waiting on something.
func (m *Manager) reconcile(ctx context.Context, name string) (time.Duration, error) {
	logger := klog.FromContext(ctx).WithValues("compositecontroller", name)
	ctx = klog.NewContext(ctx, logger)
	obj, exists := m.ccs.Get("", name)

	m.mu.Lock()
	current := m.running[name]
	m.mu.Unlock()
	if current != nil && exists && current.uid == obj.GetUID() && current.generation == obj.GetGeneration() {
		return 0, m.setReady(ctx, obj, metav1.ConditionTrue, v1alpha1.ReasonRunning, "the controller runs with synced caches")
	}
	if current != nil {
		logger.Info("Stopping compositecontroller", "generation", current.generation)
		current.controller.Stop()
		metrics.ControllerReady.DeleteLabelValues("CompositeController", name)
		m.mu.Lock()
		delete(m.running, name)
		m.mu.Unlock()
		if exists {
			m.recorder.Eventf(obj, corev1.EventTypeNormal, "Stopped", "stopped generation %d to start generation %d", current.generation, obj.GetGeneration())
		}
	}
	if !exists || obj.GetDeletionTimestamp() != nil {
		return 0, nil
	}

	controller, err := composite.New(ctx, obj, composite.Options{
		Client:    m.client,
		Resources: m.resources,
		Informers: m.informers,
		Hooks:     m.hooks,
		Recorder:  m.recorder,
		Workers:   m.opts.Workers,
	})
	var invalid *composite.InvalidSpecError
	switch {
	case errors.As(err, &invalid):
		m.recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.ReasonInvalidSpec, err.Error())
		return 0, m.setReady(ctx, obj, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec, err.Error())
	case discovery.IsNotFound(err):
		m.recorder.Event(obj, corev1.EventTypeWarning, v1alpha1.ReasonUnknownResource, err.Error())
		if err := m.setReady(ctx, obj, metav1.ConditionFalse, v1alpha1.ReasonUnknownResource, err.Error()); err != nil {
			return 0, err
		}
		// A change in discovery requeues it at once (a CRD being
		// established triggers one); retries with backoff are the fallback.
		return 0, errWaiting
	case err != nil:
		return 0, err
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := controller.Start(startCtx); err != nil {
		controller.Stop()
		return 0, fmt.Errorf("starting: %w", err)
	}
	m.mu.Lock()
	m.running[name] = &runningController{uid: obj.GetUID(), generation: obj.GetGeneration(), controller: controller}
	m.mu.Unlock()
	metrics.ControllerReady.WithLabelValues("CompositeController", name).Set(1)
	m.recorder.Eventf(obj, corev1.EventTypeNormal, "Started", "started generation %d", obj.GetGeneration())
	return 0, m.setReady(ctx, obj, metav1.ConditionTrue, v1alpha1.ReasonRunning, "the controller runs with synced caches")
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

// setReady writes the Ready condition and observedGeneration to the
// controller object's status, when they differ from what it has.
func (m *Manager) setReady(ctx context.Context, obj *unstructured.Unstructured, status metav1.ConditionStatus, reason, message string) error {
	var cs v1alpha1.ControllerStatus
	if raw, ok := obj.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &cs)
	}
	changed := meta.SetStatusCondition(&cs.Conditions, metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
	if !changed && cs.ObservedGeneration == obj.GetGeneration() {
		return nil
	}
	cs.ObservedGeneration = obj.GetGeneration()
	patch, err := json.Marshal(map[string]any{"status": cs})
	if err != nil {
		return err
	}
	_, err = m.client.Resource(v1alpha1.CompositeControllerResource).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the Ready condition: %w", err)
	}
	return nil
}
