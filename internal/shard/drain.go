package shard

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// drain waits for the syncs of the ended activations to be done: up to
// grace, then it cancels their contexts and waits up to bound more, then
// logs the syncs still running and returns anyway, so that a done that
// never comes cannot hold a handover forever. A grace of 0 cancels at
// once. Nil activations are
// skipped. It returns early if ctx ends, cancelling the syncs first.
func drain(ctx context.Context, clk clock.Clock, grace, bound time.Duration, ended ...*activation) {
	var left []*activation
	for _, a := range ended {
		if a != nil {
			left = append(left, a)
		}
	}
	if len(left) == 0 {
		return
	}
	if grace <= 0 || !waitIdle(ctx, clk, grace, left) {
		for _, a := range left {
			a.cancel()
		}
		if !waitIdle(ctx, clk, bound, left) {
			klog.FromContext(ctx).Error(nil, "Syncs of a bucket given up did not end once cancelled; going on without them", "waited", grace+bound)
		}
	}
	for _, a := range left {
		a.cancel() // release the activation's context
	}
}

// waitIdle waits until every activation of as is idle, for at most d; it
// reports whether they all are.
func waitIdle(ctx context.Context, clk clock.Clock, d time.Duration, as []*activation) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	for _, a := range as {
		select {
		case <-a.idle:
		case <-t.C():
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}
