package shard

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/metrics"
)

// renewers is the most bucket Leases renewed at once.
const renewers = 16

// renewLoop renews the member Lease and every bucket Lease held, each
// RetryPeriod, until ctx ends. It runs apart from the handovers, which
// may wait long for syncs and caches.
func (c *Coordinator) renewLoop(ctx context.Context) {
	c.every(ctx, c.opts.RetryPeriod, c.renewAll)
}

// every calls f each period on c's clock until ctx ends.
func (c *Coordinator) every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := c.opts.Clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		f(ctx)
	}
}

// renewAll renews the member Lease and the bucket Leases held, the
// bucket Leases concurrently (at most renewers at once).
func (c *Coordinator) renewAll(ctx context.Context) {
	if err := c.renewMember(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Could not renew the member Lease")
	}
	c.mu.Lock()
	held := make(map[Bucket]*heldLease, len(c.held))
	for b, h := range c.held {
		held[b] = h
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewers)
	for b, h := range held {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c.renewBucket(ctx, b, h)
		})
	}
	wg.Wait()
}

// renewBucket renews the Lease of bucket b, held as h. A Lease found
// held by another replica, or deleted, is lost at once.
func (c *Coordinator) renewBucket(ctx context.Context, b Bucket, h *heldLease) {
	h.write.Lock()
	defer h.write.Unlock()
	c.mu.Lock()
	cur, gone := h.lease, h.gone
	c.mu.Unlock()
	if gone {
		return
	}
	rctx, cancel := c.request(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		sent := c.opts.Clock.Now()
		next, err := c.leases.renew(rctx, cur)
		if err == nil {
			c.mu.Lock()
			if !h.gone {
				h.lease, h.renewed = next, sent
			}
			c.mu.Unlock()
			return
		}
		log := klog.FromContext(ctx).WithValues("lease", cur.Name)
		if attempt > 0 || !(apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
			log.Error(err, "Could not renew a bucket Lease")
			return
		}
		// The Lease changed: if this replica still holds it (an earlier
		// write succeeded unseen), renew the version read; else it is lost.
		got, gerr := c.leases.client.Get(rctx, cur.Name, metav1.GetOptions{})
		switch {
		case gerr == nil && holder(got) == c.opts.Identity:
			cur = got
			continue
		case gerr == nil || apierrors.IsNotFound(gerr):
			c.mu.Lock()
			lost := c.loseLocked(b)
			c.mu.Unlock()
			if lost {
				c.logLost(ctx, []Bucket{b}, "the Lease was taken or deleted")
			}
		default:
			log.Error(gerr, "Could not read a bucket Lease after a conflict")
		}
		return
	}
}

// watchLoop deactivates, until ctx ends, each bucket whose Lease was not
// renewed for RenewDeadline. It checks twice per RetryPeriod or per
// LeaseDuration - RenewDeadline, whichever is shorter, so that a bucket
// stops well before another replica may take it, however long the
// requests of renewLoop hang.
func (c *Coordinator) watchLoop(ctx context.Context) {
	c.every(ctx, min(c.opts.RetryPeriod, c.opts.LeaseDuration-c.opts.RenewDeadline)/2, c.expire)
}

// expire loses each bucket held whose last successful write was sent
// RenewDeadline or longer ago.
func (c *Coordinator) expire(ctx context.Context) {
	now := c.opts.Clock.Now()
	var lost []Bucket
	c.mu.Lock()
	for b, h := range c.held {
		if now.Sub(h.renewed) >= c.opts.RenewDeadline && c.loseLocked(b) {
			lost = append(lost, b)
		}
	}
	c.mu.Unlock()
	if len(lost) > 0 {
		c.logLost(ctx, lost, "not renewed within the renew deadline")
	}
}

// loseLocked forgets bucket b's Lease without releasing it (another
// replica may hold it already), deactivates b and cancels its syncs at
// once, and tells the main loop to drain them and shrink the caches. It
// reports whether b was held. c.mu must be held.
func (c *Coordinator) loseLocked(b Bucket) bool {
	h := c.held[b]
	if h == nil {
		return false
	}
	delete(c.held, b)
	h.gone = true
	a := c.deactivate(b)
	if a != nil {
		a.cancel()
	}
	c.lost = append(c.lost, lostBucket{b: b, a: a})
	metrics.ShardHandovers.WithLabelValues("lost").Inc()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

func (c *Coordinator) logLost(ctx context.Context, bs []Bucket, why string) {
	set, withCluster := c.split(bs)
	klog.FromContext(ctx).Info("Lost buckets", "buckets", set.String(), "cluster", withCluster, "reason", why)
}
