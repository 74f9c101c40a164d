package manager

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/shard"
	"github.com/metactl/metactl/internal/trigger"
)

// sharding is the manager's part in sharing the parents among replicas
// (Options.ShardBuckets, docs/scaling.md). Every replica runs every
// controller, each for the parents of the buckets it holds (the
// controller's engine.Gate), except the controllers that run whole (a
// cluster-scoped parent or decorated resource), which run only on the
// replica that holds the cluster bucket, with informers of every
// namespace.
//
// A controller object is written (its status, its finalizer, the Events
// about it, the cleanup of its parents) by one replica: the holder of the
// cluster bucket for a controller that runs whole, the leader for the
// others (responsibleFor).
type sharding struct {
	coordinator *shard.Coordinator
	// leading is set while this replica holds the leader Lease.
	leading atomic.Bool
}

// newSharding returns the sharding of opts, nil when not sharded.
func (m *Manager) newSharding(opts Options) (*sharding, error) {
	if opts.ShardBuckets == 0 {
		return nil, nil
	}
	le := opts.LeaderElection
	if le == nil {
		return nil, errors.New("manager: Options.ShardBuckets needs Options.LeaderElection (its Lease namespace, name, identity and durations)")
	}
	c, err := shard.New(shard.Options{
		Leases: m.coordination, Namespace: le.Namespace, Name: le.Name, Identity: le.Identity,
		Buckets: opts.ShardBuckets, LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline,
		RetryPeriod: le.RetryPeriod, StopGracePeriod: m.stopGracePeriod(),
		Hold: m.holdBuckets, Activated: m.bucketsActivated, ReleaseCluster: m.releaseCluster,
	})
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	return &sharding{coordinator: c}, nil
}

// namespaced reports whether gvr is a namespaced resource, for the
// informers (informer.Options.Namespaced, called with the Factory's lock
// held: from discovery's snapshot, with no request). A resource discovery
// does not know is taken as cluster-scoped: its informer is then not
// filtered, which costs memory but loses nothing (a controller resolves
// its resources through discovery before it acquires their informers).
func (m *Manager) namespaced(gvr schema.GroupVersionResource) bool {
	res, ok := m.resources.Cached(gvr)
	return ok && res.Namespaced
}

// holdBuckets makes the informers hold set (shard.Options.Hold), then has
// every controller forget the objects of buckets no longer held. The
// informers' lists are bounded as a controller's start is
// (Options.StartTimeout): past it the coordinator gives the buckets taken
// back, and a later round tries again, rather than holding their Leases
// with caches that never sync.
func (m *Manager) holdBuckets(ctx context.Context, set shard.Set) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	if err := m.informers.Hold(ctx, set); err != nil {
		return fmt.Errorf("caching buckets %s: %w", set, err)
	}
	for _, r := range m.startedControllers() {
		r.controller.ForgetNotAdmitted()
	}
	return nil
}

// bucketsActivated queues the parents of the buckets just taken in every
// running controller (shard.Options.Activated); with the cluster bucket,
// it queues every controller object, so that those that run whole start
// here, and their status is written from here.
func (m *Manager) bucketsActivated(gained shard.Set, cluster bool) {
	if gained.Len() > 0 {
		for _, r := range m.startedControllers() {
			if !r.whole {
				r.controller.EnqueueAdmitted(trigger.Trigger{Cause: trigger.CauseHandover})
			}
		}
	}
	if cluster {
		m.enqueueAll()
	}
}

// releaseCluster stops the controllers that run whole, as the cluster
// bucket is given up or lost (shard.Options.ReleaseCluster). Each is
// queued again, to start on this replica if it takes the bucket back.
func (m *Manager) releaseCluster(ctx context.Context) {
	m.mu.Lock()
	whole := map[string]*runningController{}
	for key, r := range m.running {
		if r.whole {
			whole[key] = r
		}
	}
	m.mu.Unlock()
	for key, r := range whole {
		k, _ := m.kindOf(key)
		klog.FromContext(ctx).Info("Stopping a controller that runs whole: the cluster bucket moves", "controller", key)
		m.stopRunning(k, key, r)
		m.loop.AddFor(key, trigger.Trigger{Cause: trigger.CauseHandover})
	}
}

// startedControllers returns the controllers whose Start has returned
// without error: those whose caches and queue exist. A controller still
// starting queues its parents itself once its caches have synced.
func (m *Manager) startedControllers() []*runningController {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*runningController, 0, len(m.running))
	for _, r := range m.running {
		if r.isStarted() && r.startErr == nil {
			out = append(out, r)
		}
	}
	return out
}

// parentsPerBucket counts the parents every running controller caches,
// by bucket ("cluster" for the controllers that run whole), for
// metactl_shard_bucket_parents.
func (m *Manager) parentsPerBucket() map[string]int {
	out := map[string]int{}
	for _, r := range m.startedControllers() {
		if r.whole {
			r.controller.ParentNamespaces(func(string) { out["cluster"]++ })
			continue
		}
		r.controller.ParentNamespaces(func(ns string) { out[strconv.Itoa(int(shard.Of(ns, m.opts.ShardBuckets)))]++ })
	}
	return out
}

// runsWhole reports whether the controller of obj runs whole when sharded:
// its parent resource, or one of its decorated resources, is
// cluster-scoped. A resource discovery does not know counts as
// namespaced: such a controller does not start anyway (UnknownResource).
func (m *Manager) runsWhole(ctx context.Context, k *kind, obj *unstructured.Unstructured) bool {
	if m.sharding == nil {
		return false
	}
	for _, ref := range parentResources(k, obj) {
		res, err := m.resources.Get(ctx, ref.apiVersion, ref.resource)
		if err == nil && !res.Namespaced {
			return true
		}
	}
	return false
}

// resourceRef is a resource as a controller object names it.
type resourceRef struct{ apiVersion, resource string }

// parentResources returns the resources whose objects the controller of
// obj syncs: a CompositeController's parent resource, a
// DecoratorController's resources.
func parentResources(k *kind, obj *unstructured.Unstructured) []resourceRef {
	var refs []resourceRef
	add := func(m map[string]any) {
		apiVersion, _, _ := unstructured.NestedString(m, "apiVersion")
		resource, _, _ := unstructured.NestedString(m, "resource")
		refs = append(refs, resourceRef{apiVersion, resource})
	}
	switch k.name {
	case "CompositeController":
		if parent, ok, _ := unstructured.NestedMap(obj.Object, "spec", "parentResource"); ok {
			add(parent)
		}
	case "DecoratorController":
		resources, _, _ := unstructured.NestedSlice(obj.Object, "spec", "resources")
		for _, r := range resources {
			if m, ok := r.(map[string]any); ok {
				add(m)
			}
		}
	}
	return refs
}

// gateOf returns the engine.Gate of a controller: nil when not sharded,
// the cluster bucket's for one that runs whole.
func (m *Manager) gateOf(whole bool) engine.Gate {
	switch {
	case m.sharding == nil:
		return nil
	case whole:
		return m.sharding.coordinator.WholeGate()
	}
	return m.sharding.coordinator.Gate()
}

// runsHere reports whether the controller of obj may run on this replica:
// always, but for one that runs whole while another replica holds the
// cluster bucket.
func (m *Manager) runsHere(whole bool) bool {
	return m.sharding == nil || !whole || m.sharding.coordinator.OwnsCluster()
}

// responsibleFor reports whether this replica writes the controller object
// obj (its status and finalizer, the Events about it, the cleanup of its
// parents): always when not sharded; else the holder of the cluster
// bucket for a controller that runs whole, the leader for the others.
func (m *Manager) responsibleFor(ctx context.Context, k *kind, obj *unstructured.Unstructured) bool {
	if m.sharding == nil {
		return true
	}
	if m.runsWhole(ctx, k, obj) {
		return m.sharding.coordinator.OwnsCluster()
	}
	return m.sharding.leading.Load()
}

// worksOn reports whether this replica works on the objects of namespace:
// always when not sharded; sharded, when it holds the namespace's bucket,
// or, for a cluster-scoped object (namespace ""), the cluster bucket. A
// namespaced object of a controller that runs whole is answered for by
// its namespace's bucket's holder, which knows only the controllers that
// do not run whole.
func (m *Manager) worksOn(namespace string) bool {
	switch {
	case m.sharding == nil:
		return true
	case namespace == "":
		return m.sharding.coordinator.OwnsCluster()
	}
	return m.sharding.coordinator.Gate().Admits(namespace)
}

// runSharded is Run when sharded: the controllers run at once, each for
// the buckets this replica holds, and the leader Lease only decides who
// writes the controller objects (responsibleFor). On ctx's end the
// buckets are given up (their syncs drained) and the controllers stopped
// before the leader Lease is released. Losing the leader Lease ends Run at
// once with ErrLeadershipLost, as without sharding.
func (m *Manager) runSharded(ctx context.Context, le *LeaderElection) error {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(le.Namespace, le.Name), "identity", le.Identity)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	term := newLeadership()
	// Every replica works: run's end, not the start of leading, is what
	// awaitElectionEnd waits for.
	term.leading.Store(true)
	go func() { term.done <- m.run(runCtx) }()
	elector, err := m.newElector(le, m.shardedLeaderCallbacks(logger, term))
	if err != nil {
		stopRun()
		<-term.done
		return fmt.Errorf("leader election: %w", err)
	}
	release := runElector(ctx, elector)
	return awaitElectionEnd(ctx, term, release, stopRun, logger)
}

// shardedLeaderCallbacks make this replica the writer of the controller
// objects while it leads (responsibleFor), and tell term when it stops
// leading.
func (m *Manager) shardedLeaderCallbacks(logger klog.Logger, term *leadership) leaderelection.LeaderCallbacks {
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) {
			logger.Info("Became the leader: writing the controller objects")
			metrics.Leader.Set(1)
			m.sharding.leading.Store(true)
			// Before run is ready, its first reconcile of every
			// controller object comes anyway.
			m.mu.Lock()
			ready := m.ready
			m.mu.Unlock()
			if ready {
				m.enqueueAll()
			}
		},
		OnStoppedLeading: func() {
			metrics.Leader.Set(0)
			m.sharding.leading.Store(false)
			term.lostOnce.Do(func() { close(term.lost) })
		},
	}
}

// holdNoBucket makes the informers hold no bucket until the coordinator
// takes some, so that a controller started before then caches nothing.
// Not sharded, it does nothing.
func (m *Manager) holdNoBucket(ctx context.Context) error {
	if m.sharding == nil {
		return nil
	}
	none, err := shard.NewSet(m.opts.ShardBuckets)
	if err != nil {
		return err
	}
	return m.informers.Hold(ctx, none)
}

// runCoordinator runs the coordinator until ctx ends and it has given up
// its buckets; run calls it once its caches of controller objects have
// synced, and waits for it.
func (m *Manager) runCoordinator(ctx context.Context) (wait func()) {
	if m.sharding == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.sharding.coordinator.Run(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Sharding stopped")
		}
	}()
	return func() { <-done }
}
