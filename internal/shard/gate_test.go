package shard

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metactl/metactl/internal/metrics"
)

// namespaceOf returns a namespace whose bucket of buckets is b.
func namespaceOf(t *testing.T, b Bucket, buckets int) string {
	t.Helper()
	for i := range 100000 {
		ns := "ns-" + string(rune('a'+i%26)) + bucketKey(Bucket(i))
		if Of(ns, buckets) == b {
			return ns
		}
	}
	t.Fatalf("no namespace in bucket %d of %d", b, buckets)
	return ""
}

func newTestGate(buckets int) *Gate {
	return newGate(buckets, func(ns string) int { return int(Of(ns, buckets)) }, strconv.Itoa)
}

// TestGateAdmitsOnlyActiveBuckets checks that Admits and Begin accept a
// namespace only while its bucket is active.
func TestGateAdmitsOnlyActiveBuckets(t *testing.T) {
	g := newTestGate(8)
	in, out := namespaceOf(t, 3, 8), namespaceOf(t, 5, 8)
	if g.Admits(in) {
		t.Fatal("a gate admits before any bucket is active")
	}
	g.activate(3)
	if !g.Admits(in) || g.Admits(out) {
		t.Fatalf("bucket 3 active: Admits(bucket 3) = %v, Admits(bucket 5) = %v", g.Admits(in), g.Admits(out))
	}
	if _, done, ok := g.Begin(context.Background(), out); ok {
		done()
		t.Fatal("Begin started a sync of an inactive bucket")
	}
	syncs := metrics.ShardBucketSyncs.WithLabelValues("3")
	before := testutil.ToFloat64(syncs)
	ctx, done, ok := g.Begin(context.Background(), in)
	if !ok || ctx.Err() != nil {
		t.Fatalf("Begin of an active bucket: ok %v, ctx %v", ok, ctx.Err())
	}
	done()
	if got := testutil.ToFloat64(syncs) - before; got != 1 {
		t.Errorf("metactl_shard_bucket_syncs_total{bucket=\"3\"} grew by %v for one sync begun, want 1", got)
	}
	g.deactivate(3)
	if g.Admits(in) {
		t.Fatal("a deactivated bucket is still admitted")
	}
	if _, _, ok := g.Begin(context.Background(), in); ok {
		t.Fatal("Begin started a sync of a deactivated bucket")
	}
}

// TestDrainWaitsThenCancelsAtGrace checks that a bucket given up waits
// for its sync in flight, does not cancel it before the grace period,
// cancels it at the grace period, and then waits for its done.
func TestDrainWaitsThenCancelsAtGrace(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := newTestGate(4)
	ns := namespaceOf(t, 1, 4)
	g.activate(1)
	syncCtx, done, ok := g.Begin(context.Background(), ns)
	if !ok {
		t.Fatal("Begin refused an active bucket")
	}
	a := g.deactivate(1)
	drained := make(chan struct{})
	go func() {
		drain(context.Background(), clk, 10*time.Second, 5*time.Second, a)
		close(drained)
	}()
	waitFor(t, "drain's grace timer", clk.HasWaiters)
	clk.Step(9 * time.Second)
	// A drain that cancels early would do so within microseconds of the
	// step that fired its timer.
	for range 100 {
		if syncCtx.Err() != nil {
			t.Fatal("the sync was cancelled before the grace period")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-drained:
		t.Fatal("drain returned with a sync in flight, before the grace period")
	default:
	}
	clk.Step(time.Second)
	waitFor(t, "the sync to be cancelled at the grace period", func() bool { return syncCtx.Err() != nil })
	select {
	case <-drained:
		t.Fatal("drain returned as it cancelled, before the sync was done")
	default:
	}
	done()
	done() // idempotent
	waitFor(t, "drain to return once the sync is done", func() bool {
		select {
		case <-drained:
			return true
		default:
			return false
		}
	})
}

// TestDrainReturnsWhenSyncsEnd checks that a drain ends as soon as the
// syncs are done, without cancelling them, and that one whose done never
// comes does not hold it past grace + bound.
func TestDrainReturnsWhenSyncsEnd(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	g := newTestGate(4)
	ns := namespaceOf(t, 2, 4)
	g.activate(2)
	syncCtx, done, _ := g.Begin(context.Background(), ns)
	a := g.deactivate(2)
	done()
	drain(context.Background(), clk, time.Hour, time.Hour, a) // must not wait: the fake clock never moves
	if syncCtx.Err() == nil {
		t.Fatal("a sync done is not cancelled by its own done")
	}

	g.activate(2)
	stuckCtx, _, _ := g.Begin(context.Background(), ns)
	_, done2, _ := g.Begin(context.Background(), ns)
	done2()
	done2() // a second done must not count for the stuck sync
	a = g.deactivate(2)
	drained := make(chan struct{})
	go func() {
		drain(context.Background(), clk, 10*time.Second, 5*time.Second, a)
		close(drained)
	}()
	waitFor(t, "drain's grace timer", clk.HasWaiters)
	clk.Step(10 * time.Second)
	waitFor(t, "the stuck sync to be cancelled", func() bool { return stuckCtx.Err() != nil })
	waitFor(t, "drain's second timer", clk.HasWaiters)
	select {
	case <-drained:
		t.Fatal("drain returned before the second bound with a sync still in flight")
	default:
	}
	clk.Step(5 * time.Second)
	waitFor(t, "drain to give up on a done that never comes", func() bool {
		select {
		case <-drained:
			return true
		default:
			return false
		}
	})
}

// waitFor polls cond until it holds, failing t after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
