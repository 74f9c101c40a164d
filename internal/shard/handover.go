package shard

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/metrics"
)

// hold calls Options.Hold, if set, with the active hash buckets and
// those of extra.
func (c *Coordinator) hold(ctx context.Context, extra Set) error {
	if c.opts.Hold == nil {
		return nil
	}
	c.mu.Lock()
	set := c.activeSet()
	c.mu.Unlock()
	set, _ = NewSet(c.opts.Buckets, append(set.members, extra.members...)...)
	return c.opts.Hold(ctx, set)
}

// bucketLeases lists the bucket Leases, by name, and times each from
// when it changed (see observer); the Leases of buckets assigned to this
// replica later are then timed from their last change, not from then.
func (c *Coordinator) bucketLeases(ctx context.Context) (map[string]*coordinationv1.Lease, error) {
	ctx, cancel := c.request(ctx)
	defer cancel()
	list, err := c.leases.client.List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{BucketLabel: c.opts.Name}).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing bucket Leases: %w", err)
	}
	byName := map[string]*coordinationv1.Lease{}
	for i := range list.Items {
		l := &list.Items[i]
		byName[l.Name] = l
		c.seen.expired(l, c.opts.LeaseDuration)
	}
	return byName, nil
}

// tryTake takes the Lease of bucket b if it is free: absent, without a
// holder, held by this replica, or not renewed within the lease
// duration as this replica observed it. cur is the Lease as listed, nil
// if it was not (it is read then). It reports whether b is now held; a
// Conflict (another replica wrote first) is not an error.
func (c *Coordinator) tryTake(ctx context.Context, b Bucket, cur *coordinationv1.Lease) (bool, error) {
	ctx, cancel := c.request(ctx)
	defer cancel()
	name := BucketLeaseName(c.opts.Name, b)
	if cur == nil {
		got, err := c.leases.client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, err
		default:
			cur = got
		}
	}
	if cur != nil && holder(cur) != c.opts.Identity && !c.seen.expired(cur, c.opts.LeaseDuration) {
		return false, nil
	}
	sent := c.opts.Clock.Now()
	got, err := c.leases.take(ctx, name, cur)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		klog.FromContext(ctx).V(2).Info("Another replica took a bucket first", "lease", name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	c.held[b] = &heldLease{lease: got, renewed: sent}
	c.mu.Unlock()
	return true, nil
}

// take takes the free Leases of bs, then makes the caches hold their
// objects, then activates those still held and tells Activated.
func (c *Coordinator) take(ctx context.Context, bs []Bucket, listed map[string]*coordinationv1.Lease) {
	log := klog.FromContext(ctx)
	var taken []Bucket
	for _, b := range bs {
		ok, err := c.tryTake(ctx, b, listed[BucketLeaseName(c.opts.Name, b)])
		if err != nil {
			log.Error(err, "Could not take a bucket", "lease", BucketLeaseName(c.opts.Name, b))
		}
		if ok {
			taken = append(taken, b)
		}
	}
	if len(taken) == 0 {
		return
	}
	set, _ := c.split(taken)
	if set.Len() > 0 {
		if err := c.hold(ctx, set); err != nil {
			if ctx.Err() != nil {
				return // Run gives up every bucket held, these too
			}
			// A Hold that fails: the Leases go back, and a later round
			// tries again.
			log.Error(err, "Could not make the caches hold the buckets taken; giving them back", "buckets", set.String())
			c.giveUp(ctx, taken)
			return
		}
	}
	gained := c.activate(taken)
	if len(gained) == 0 {
		return
	}
	set, withCluster := c.split(gained)
	metrics.ShardHandovers.WithLabelValues("gained").Add(float64(len(gained)))
	log.Info("Took buckets", "buckets", set.String(), "cluster", withCluster)
	if c.opts.Activated != nil {
		c.opts.Activated(set, withCluster)
	}
}

// giveUp hands bs over: it deactivates them, drains their syncs (up to
// StopGracePeriod, then cancels them), shrinks the caches, stops the
// controllers that run whole if bs holds the cluster bucket, and only
// then releases the Leases still held, so that another replica may take
// them at once. Buckets of bs not active are only released. A handover
// begun goes to its end even if ctx ends meanwhile (Run's end would
// give the buckets up the same way): it runs on a context of its own,
// which ends StopGracePeriod + CancelWait + LeaseDuration after it
// began.
func (c *Coordinator) giveUp(ctx context.Context, bs []Bucket) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.StopGracePeriod+c.opts.CancelWait+c.opts.LeaseDuration)
	defer cancel()
	log := klog.FromContext(ctx)
	var ended []*activation
	var wasActive []Bucket
	c.mu.Lock()
	for _, b := range bs {
		if a := c.deactivate(b); a != nil {
			ended = append(ended, a)
			wasActive = append(wasActive, b)
		}
	}
	c.mu.Unlock()
	drain(ctx, c.opts.Clock, c.opts.StopGracePeriod, c.opts.CancelWait, ended...)
	if set, _ := c.split(bs); set.Len() > 0 {
		if err := c.hold(ctx, Set{Buckets: c.opts.Buckets}); err != nil {
			log.Error(err, "Could not make the caches drop the buckets given up", "buckets", set.String())
		}
	}
	if _, clusterWasActive := c.split(wasActive); clusterWasActive && c.opts.ReleaseCluster != nil {
		c.opts.ReleaseCluster(ctx)
	}
	var released []Bucket
	for _, b := range bs {
		if c.release(ctx, b) {
			released = append(released, b)
		}
	}
	if len(released) > 0 {
		metrics.ShardHandovers.WithLabelValues("released").Add(float64(len(released)))
		set, withCluster := c.split(released)
		log.Info("Gave up buckets", "buckets", set.String(), "cluster", withCluster)
	}
}

// release forgets bucket b's Lease and empties its holder, if this
// replica still holds it; it reports whether the Lease was released.
func (c *Coordinator) release(ctx context.Context, b Bucket) bool {
	c.mu.Lock()
	h := c.held[b]
	if h == nil {
		c.mu.Unlock()
		return false
	}
	delete(c.held, b)
	h.gone = true
	c.mu.Unlock()
	// Wait for a renewal in flight, whose version the release must carry.
	h.write.Lock()
	defer h.write.Unlock()
	c.mu.Lock()
	cur := h.lease
	c.mu.Unlock()
	ctx, cancel := c.request(ctx)
	defer cancel()
	log := klog.FromContext(ctx).WithValues("lease", cur.Name)
	for attempt := 0; ; attempt++ {
		err := c.leases.release(ctx, cur)
		if err == nil {
			return true
		}
		if attempt > 0 || !apierrors.IsConflict(err) {
			log.Error(err, "Could not release a bucket Lease; others may take it once it expires")
			return false
		}
		var got *coordinationv1.Lease
		got, err = c.leases.client.Get(ctx, cur.Name, metav1.GetOptions{})
		if err != nil || holder(got) != c.opts.Identity {
			return false // taken by another already, or unreadable
		}
		cur = got
	}
}

// drainLost drains the syncs of the buckets lost since the last call
// (cancelled already), stops the controllers that run whole if the
// cluster bucket was among them, and shrinks the caches.
func (c *Coordinator) drainLost(ctx context.Context) {
	c.mu.Lock()
	lost := c.lost
	c.lost = nil
	c.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	var ended []*activation
	var bs []Bucket
	clusterWasActive := false
	for _, l := range lost {
		ended = append(ended, l.a)
		bs = append(bs, l.b)
		clusterWasActive = clusterWasActive || (l.b == cluster && l.a != nil)
	}
	drain(ctx, c.opts.Clock, 0, c.opts.CancelWait, ended...)
	if clusterWasActive && c.opts.ReleaseCluster != nil {
		c.opts.ReleaseCluster(ctx)
	}
	if set, _ := c.split(bs); set.Len() > 0 {
		if err := c.hold(ctx, Set{Buckets: c.opts.Buckets}); err != nil {
			klog.FromContext(ctx).Error(err, "Could not make the caches drop the buckets lost", "buckets", set.String())
		}
	}
}
