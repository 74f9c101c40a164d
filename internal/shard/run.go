package shard

import (
	"context"
	"sync"

	"k8s.io/klog/v2"
)

// Run shares the buckets with the other replicas until ctx ends: it
// renews its member Lease and the bucket Leases it holds every
// RetryPeriod, and in each round (every RetryPeriod, and at once when a
// bucket is lost) reads the live members, gives up the buckets assigned
// elsewhere and takes those assigned to it. Once ctx ends it gives up
// every bucket as in a handover, deletes its member Lease, and returns
// nil. Giving up is bounded: Hold, ReleaseCluster and the requests get
// a context that ends StopGracePeriod + CancelWait + LeaseDuration after
// ctx did (a handover under way when ctx ends finishes first, within as
// long). Run must be called once.
func (c *Coordinator) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithValues("identity", c.opts.Identity)
	ctx = klog.NewContext(ctx, log)
	// The Leases are renewed until every bucket is released, after ctx
	// ends.
	keep, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopKeeping()

	if err := c.renewMember(ctx); err != nil {
		log.Error(err, "Could not write the member Lease; retrying")
	}
	wg.Go(func() { c.renewLoop(keep) })
	wg.Go(func() { c.watchLoop(keep) })

	t := c.opts.Clock.NewTicker(c.opts.RetryPeriod)
	defer t.Stop()
	for ctx.Err() == nil {
		c.round(ctx)
		select {
		case <-ctx.Done():
		case <-t.C():
		case <-c.wake:
		}
	}

	// Give everything up, on a context of its own: ctx has ended.
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.StopGracePeriod+c.opts.CancelWait+c.opts.LeaseDuration)
	defer cancel()
	c.drainLost(stop)
	c.mu.Lock()
	var all []Bucket
	for b := range c.held {
		all = append(all, b)
	}
	c.mu.Unlock()
	c.giveUp(stop, all)
	stopKeeping()
	wg.Wait()
	if err := c.deleteMember(stop); err != nil {
		log.Error(err, "Could not delete the member Lease; the others will see it expire")
	}
	return nil
}

// round drains the buckets lost, reads the members and the bucket
// Leases, gives up the buckets assigned to others and takes those
// assigned to this replica.
func (c *Coordinator) round(ctx context.Context) {
	c.drainLost(ctx)
	live, others, err := c.liveMembers(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Could not read the members; keeping the buckets as they are")
		return
	}
	listed, err := c.bucketLeases(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Could not read the bucket Leases; keeping the buckets as they are")
		return
	}
	mine, withCluster := Assign(c.opts.Buckets, live, c.opts.Identity)
	want := mine.Members()
	if withCluster {
		want = append(want, cluster)
	}
	wanted := map[Bucket]bool{}
	for _, b := range want {
		wanted[b] = true
	}
	var leave, take []Bucket
	c.mu.Lock()
	for b := range c.held {
		if !wanted[b] {
			leave = append(leave, b)
		}
	}
	for _, b := range want {
		if c.held[b] == nil {
			take = append(take, b)
		}
	}
	c.mu.Unlock()
	if len(leave) > 0 {
		c.giveUp(ctx, leave)
	}
	// A live member with another number of buckets numbers them
	// otherwise: its bucket 3 is not this replica's bucket 3, and the
	// Lease of one does not guard the other. While there is one (a
	// rolling update of --shard-buckets), no bucket is taken: the held
	// ones stay until given up, and the others wait for the members of
	// one number to be gone.
	if len(take) > 0 && others > 0 {
		klog.FromContext(ctx).Info("Not taking buckets while a replica with another number of buckets is live", "buckets", len(take), "others", others)
		return
	}
	if len(take) > 0 && ctx.Err() == nil {
		c.take(ctx, take, listed)
	}
}
