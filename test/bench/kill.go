package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/metactl/metactl/internal/shard"
)

// KillResult is one -kill-one run: after a sharded run's update wave, one
// replica is killed with SIGKILL. Its member and bucket Leases expire
// after the lease duration; the other replicas then take its buckets and
// sync their parents (trigger handover; docs/scaling.md, "Failure
// cases"). The target: every parent of its buckets synced again (called
// by another replica) within the lease duration + 10 s of the kill,
// before any parent changes. Then every parent is updated at once, and
// the wave's convergence is reported beside.
type KillResult struct {
	Round    int `json:"round"`
	Replicas int `json:"replicas"`
	// Killed is the index of the killed replica, PID its process.
	Killed   int    `json:"killed"`
	PID      int    `json:"pid"`
	Identity string `json:"identity,omitempty"`
	// Buckets are the killed replica's buckets, and BucketsFrom where
	// they were learnt: "metrics" (its metactl_shard_bucket_owned just
	// before the kill), "hook" (the parents its Metactl-Replica header
	// called in the update wave), or "" (unknown: then KilledParents is
	// 0 and the figures of its parents are not measured).
	Buckets     []string `json:"buckets,omitempty"`
	BucketsFrom string   `json:"bucketsFrom"`
	// KilledParents is the parents of its buckets.
	KilledParents        int     `json:"killedParents"`
	LeaseDurationSeconds float64 `json:"leaseDurationSeconds"`
	// KilledParentsResyncedSeconds is, from the SIGKILL, when the last
	// parent of the killed replica's buckets was first called by another
	// replica, before any update: the handover's syncs. -1: some parent
	// was not called within the lease duration + 60 s.
	KilledParentsResyncedSeconds float64 `json:"killedParentsResyncedSeconds"`
	// From the SIGKILL: the benchmark's writes of every parent issued;
	// every parent converged to its new value; every parent of the
	// killed replica's buckets converged, and called by the hook (by
	// another replica: the killed one is gone).
	WritesIssuedSeconds           float64 `json:"writesIssuedSeconds"`
	ConvergedSeconds              float64 `json:"convergedSeconds"`
	KilledParentsConvergedSeconds float64 `json:"killedParentsConvergedSeconds"`
	KilledParentsCalledSeconds    float64 `json:"killedParentsCalledSeconds"`
	// OtherParentsConvergedSeconds is the same for the others' parents,
	// which nothing should hold up.
	OtherParentsConvergedSeconds float64      `json:"otherParentsConvergedSeconds"`
	HookCallsPerParent           float64      `json:"hookCallsPerParent"`
	Callers                      *HookCallers `json:"callers,omitempty"`
}

// killPhase kills the last replica of the running sharded variant and
// updates every parent again; the killed replica leaves procs.
func (b *bench) killPhase(ctx context.Context, round int) error {
	k := len(b.replicas)
	victim := b.replicas[k-1]
	res := KillResult{Round: round, Replicas: k, Killed: k - 1, PID: victim.PID, Identity: b.identity(k - 1),
		LeaseDurationSeconds: b.o.leaseDuration.Seconds()}
	if s, err := victim.scrape(ctx); err == nil {
		if owned, ok := bucketsOwned(s); ok {
			res.Buckets, res.BucketsFrom = owned, "metrics"
		}
	}
	updateCalls := b.lastCalls
	n := b.o.n
	want := func(i int) string { return value("kill", i) }
	_ = b.waitQuiet(ctx)
	b.hook.take()
	done := b.tracker.begin("kill", want)
	logf("%s kill (round %d): SIGKILL of replica %d (pid %d, buckets %v), then %d parents updated", b.who(), round, k-1, victim.PID, res.Buckets, n)
	tKill := time.Now()
	if err := syscall.Kill(-victim.PID, syscall.SIGKILL); err != nil {
		b.tracker.end()
		return fmt.Errorf("killing replica %d: %w", k-1, err)
	}
	for victim.Exited() == nil {
		sleep(ctx, 10*time.Millisecond)
		if ctx.Err() != nil {
			b.tracker.end()
			return ctx.Err()
		}
	}
	victim.Stop() // closes its log
	b.replicas = b.replicas[:k-1]
	if len(b.replicaIDs) >= k {
		b.replicaIDs = b.replicaIDs[:k-1]
	}
	killed := b.killedParents(&res, updateCalls)
	resyncCalls, err := b.awaitResync(ctx, &res, killed, tKill)
	if err != nil {
		b.tracker.end()
		return err
	}
	err = parallel(ctx, n, b.o.workers, func(ctx context.Context, i int) error {
		b.tracker.wrote(i, time.Now())
		if err := b.patchParent(ctx, i, want(i)); err != nil {
			return fmt.Errorf("kill: update %s: %w", parentName(i), err)
		}
		return nil
	})
	if err != nil {
		b.tracker.end()
		return err
	}
	res.WritesIssuedSeconds = round3(time.Since(tKill).Seconds())
	timeout := time.After(b.o.timeout)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			b.tracker.end()
			return ctx.Err()
		case <-timeout:
			got, example := b.tracker.progress()
			b.tracker.end()
			return fmt.Errorf("kill: only %d of %d parents converged within %v; e.g. %s", got, n, b.o.timeout, example)
		case <-tick.C:
			if err := b.exited(); err != nil {
				b.tracker.end()
				return err
			}
			got, _ := b.tracker.progress()
			logf("metactl kill: %d/%d converged %.0fs after the kill", got, n, time.Since(tKill).Seconds())
		}
	}
	_, converged, last := b.tracker.end()
	res.ConvergedSeconds = round3(last.Sub(tKill).Seconds())
	if _, err := b.settleAll(ctx); err != nil {
		return err
	}
	calls := append(resyncCalls, b.hook.take()...)
	c := analyzeCalls(calls)
	res.Callers = &c
	res.HookCallsPerParent = round3(float64(len(calls)) / float64(n))

	firstCall := map[string]time.Time{}
	for _, x := range calls[len(resyncCalls):] {
		if t, ok := firstCall[x.Parent]; !ok || x.Start.Before(t) {
			firstCall[x.Parent] = x.Start
		}
	}
	var lastKilled, lastOther, lastCalled time.Time
	called := true
	for i := range n {
		at := converged[i]
		if !killed[i] {
			lastOther = later(lastOther, at)
			continue
		}
		res.KilledParents++
		lastKilled = later(lastKilled, at)
		t, ok := firstCall[parentNamespace(i, b.o.namespaces)+"/"+parentName(i)]
		called = called && ok
		lastCalled = later(lastCalled, t)
	}
	since := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return round3(t.Sub(tKill).Seconds())
	}
	res.KilledParentsConvergedSeconds, res.OtherParentsConvergedSeconds = since(lastKilled), since(lastOther)
	res.KilledParentsCalledSeconds = since(lastCalled)
	if !called {
		res.KilledParentsCalledSeconds = -1 // some parent of its buckets was never called
	}
	logf("%s kill: the %d parents of its buckets (from %q) synced again by the others %.2fs after the kill; then updated, they converged after %.2fs, called after %.2fs, every parent after %.2fs; lease duration %v",
		b.who(), res.KilledParents, res.BucketsFrom, res.KilledParentsResyncedSeconds, res.KilledParentsConvergedSeconds, res.KilledParentsCalledSeconds, res.ConvergedSeconds, b.o.leaseDuration)
	b.cur.kills = append(b.cur.kills, res)
	return nil
}

// awaitResync waits, from tKill, until every parent killed marks has been
// called by the hook (by another replica: the killed one is gone), or
// the lease duration + 60 s, and records when in res; it returns the
// calls seen meanwhile. It polls the hook server's record: a benchmark
// measuring, not a test synchronising.
func (b *bench) awaitResync(ctx context.Context, res *KillResult, killed []bool, tKill time.Time) ([]hookCall, error) {
	want := map[string]bool{}
	for i, k := range killed {
		if k {
			want[parentNamespace(i, b.o.namespaces)+"/"+parentName(i)] = true
		}
	}
	var seen []hookCall
	var last time.Time
	deadline := tKill.Add(b.o.leaseDuration + 60*time.Second)
	for len(want) > 0 && time.Now().Before(deadline) {
		sleep(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		for _, x := range b.hook.take() {
			seen = append(seen, x)
			if want[x.Parent] && x.Start.After(tKill) {
				delete(want, x.Parent)
				last = later(last, x.Start)
			}
		}
	}
	res.KilledParentsResyncedSeconds = round3(last.Sub(tKill).Seconds())
	if len(want) > 0 || last.IsZero() {
		res.KilledParentsResyncedSeconds = -1
	}
	logf("%s kill: the parents of its buckets synced again %.2fs after the kill (%d not)", b.who(), res.KilledParentsResyncedSeconds, len(want))
	return seen, nil
}

// killedParents returns which parents belong to the killed replica's
// buckets: from its buckets when known, else from the update wave's hook
// calls (the parents whose calls carried its identity, or, without its
// identity, that of the replica no longer calling).
func (b *bench) killedParents(res *KillResult, updateCalls []hookCall) []bool {
	killed := make([]bool, b.o.n)
	if res.BucketsFrom == "metrics" {
		for i := range b.o.n {
			bk := strconv.Itoa(int(shard.Of(parentNamespace(i, b.o.namespaces), b.o.shardBuckets)))
			killed[i] = slices.Contains(res.Buckets, bk)
		}
		return killed
	}
	id := res.Identity
	if id == "" {
		alive := map[string]bool{}
		for i := range b.replicas {
			if x := b.identity(i); x != "" {
				alive[x] = true
			}
		}
		for _, x := range updateCalls {
			if x.Replica != "" && !alive[x.Replica] && len(alive) == len(b.replicas) {
				id = x.Replica
				break
			}
		}
	}
	if id == "" {
		return killed
	}
	parents := map[string]bool{}
	for _, x := range updateCalls {
		if x.Replica == id {
			parents[x.Parent] = true
		}
	}
	buckets := map[int]bool{}
	for i := range b.o.n {
		ns := parentNamespace(i, b.o.namespaces)
		if parents[ns+"/"+parentName(i)] {
			killed[i] = true
			buckets[int(shard.Of(ns, b.o.shardBuckets))] = true
		}
	}
	res.BucketsFrom = "hook"
	for _, bk := range slices.Sorted(maps.Keys(buckets)) {
		res.Buckets = append(res.Buckets, strconv.Itoa(bk))
	}
	return killed
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
