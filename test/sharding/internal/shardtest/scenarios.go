package shardtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/testenv"
)

// Mode is how the API server under test filters: FilterServer with the
// ShardedListAndWatch gate, FilterClient without (metactl_shard_filter_mode's
// mode label, docs/scaling.md).
type Mode string

const (
	FilterServer Mode = "server"
	FilterClient Mode = "client"
)

// moveBound is how long, after a replica joins or leaves, the parents of
// the buckets that move may take to be synced by their new replica: a
// bucket held by a replica that is gone is free after the lease duration
// (at most; a replica that left cleanly releases it at once), and then its
// gainer lists its objects again and syncs them, 10 seconds.
func moveBound(tm Timing) time.Duration { return tm.LeaseDuration + 10*time.Second }

// firstConvergence bounds the first sync of all parents by a fresh
// fleet: starting metactl, discovery, informers and 120 syncs on a
// loaded machine.
const firstConvergence = 90 * time.Second

// OneTwoFour runs 1, then 2, then 4 replicas over 120 parents: after each
// step every parent converges to a new spec within moveBound, and the
// hook's record shows no double sync; with 4 replicas, at least 2 of them
// are called (the parents' 14 or so buckets all assigned to one replica of
// four: about 1 in 10^8), each parent last by the holder of its bucket's
// Lease; some replica reports the filter mode the API server allows, and
// none the other.
func OneTwoFour(t *testing.T, env *testenv.Environment, mode Mode) {
	const test = "one-two-four"
	h := NewHook(t)
	Controller(t, env, test, ThingsGVR, h)
	ps := NamespacedParents(t, env, test, Namespaces(t, env, Small.Namespaces), Small.PerNamespace)
	f := NewFleet(t, env, Fast)
	start := time.Now()
	one := f.Start(t)
	ps.WaitConverged(t, start, firstConvergence, "1 replica: every parent synced")
	if spread := Spread(h.Calls(), start); len(spread) != 1 || spread[one.Identity] != len(ps.Keys) {
		t.Errorf("1 replica: calls by replica %v, want all %d parents by %s", spread, len(ps.Keys), one.Identity)
	}

	f.Start(t)
	since := ps.Bump(t)
	ps.WaitConverged(t, since, moveBound(Fast), "2 replicas: every parent synced after a change")
	f.Start(t)
	f.Start(t)
	since = ps.Bump(t)
	ps.WaitConverged(t, since, moveBound(Fast), "4 replicas: every parent synced after a change")
	spread := Spread(h.Calls(), since)
	t.Logf("4 replicas: parents per replica after the last change: %v", spread)
	if len(spread) < 2 {
		t.Errorf("4 replicas: only %d were called after the last change (%v), want at least 2: the parents are not sharded", len(spread), spread)
	}
	WaitCallsMatchLeases(t, h, f, ps, moveBound(Fast))
	CheckCalls(t, h.Calls(), f, ps.Keys)
	checkFilterMode(t, f.Running(), mode)
	checkShardMetrics(t, f.Running(), len(ps.Keys))
	checkExplainAnswers(t, f.Running(), ps)
}

// checkExplainAnswers asks every replica's explain endpoint about a few
// parents: exactly one, the holder of the parent's bucket, answers that
// it works on it, and knows its controller.
func checkExplainAnswers(t *testing.T, replicas []*Replica, ps *Parents) {
	t.Helper()
	for _, k := range ps.Keys[:min(5, len(ps.Keys))] {
		ns, name := split(k)
		var working []string
		for _, r := range replicas {
			q := url.Values{"group": {ps.gvr.Group}, "version": {ps.gvr.Version}, "resource": {ps.gvr.Resource}, "namespace": {ns}, "name": {name}}
			u := strings.TrimSuffix(r.Metrics, "/metrics") + explain.Path + "?" + q.Encode()
			resp, err := http.Get(u)
			if err != nil {
				t.Errorf("explain %s: %v", u, err)
				continue
			}
			var a explain.Answer
			err = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			if err != nil {
				t.Errorf("explain %s: %v", u, err)
				continue
			}
			if a.Process.Leading {
				working = append(working, r.Identity)
				if len(a.Controllers) != 1 {
					t.Errorf("%s: replica %s works on it but knows %d controllers of it, want 1", k, r.Identity, len(a.Controllers))
				}
			}
		}
		if len(working) != 1 {
			t.Errorf("%s: replicas %v answer explain as working on it, want exactly one", k, working)
		}
	}
}

// shardMetrics are the metrics docs/monitoring.md lists for sharding.
var shardMetrics = []string{
	"metactl_shard_bucket_owned", "metactl_shard_bucket_syncs_total", "metactl_shard_bucket_parents",
	"metactl_shard_bucket_cached_objects", "metactl_shard_members", "metactl_shard_members_ignored",
	"metactl_shard_handovers_total", "metactl_shard_filter_mode",
}

// checkShardMetrics checks that each metric of sharding is served by some
// replica, and that the replicas' metactl_shard_bucket_parents add up to
// parents: each parent is cached by the one replica that holds its
// bucket, once its informers have listed again without the buckets they
// gave up.
func checkShardMetrics(t *testing.T, replicas []*Replica, parents int) {
	t.Helper()
	var seen map[string]bool
	var cached float64
	testenv.Eventually(t, 30*time.Second, "the replicas' parents per bucket adding up to the parents", func(context.Context) (bool, error) {
		var err error
		seen, cached, err = scrapeShardMetrics(replicas)
		return int(cached) == parents, err
	})
	for _, name := range shardMetrics {
		if !seen[name] {
			t.Errorf("no replica serves %s", name)
		}
	}
}

// scrapeShardMetrics returns which of shardMetrics replicas serve, and
// the sum of their metactl_shard_bucket_parents.
func scrapeShardMetrics(replicas []*Replica) (map[string]bool, float64, error) {
	seen := map[string]bool{}
	cached := 0.0
	for _, r := range replicas {
		resp, err := http.Get(r.Metrics)
		if err != nil {
			return nil, 0, fmt.Errorf("scraping %s: %w", r.Metrics, err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			for _, name := range shardMetrics {
				if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
					seen[name] = true
				}
			}
			if strings.HasPrefix(line, "metactl_shard_bucket_parents{") {
				if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
					cached += v
				}
			}
		}
		resp.Body.Close()
	}
	return seen, cached, nil
}

// Kill runs 4 replicas, SIGKILLs the one called for the most parents and
// changes every parent: all converge within moveBound of the kill (its
// buckets' Leases expire, the others take them), none of them by the
// killed one, and no double sync.
func Kill(t *testing.T, env *testenv.Environment) {
	const test = "kill"
	h := NewHook(t)
	Controller(t, env, test, ThingsGVR, h)
	ps := NamespacedParents(t, env, test, Namespaces(t, env, Small.Namespaces), Small.PerNamespace)
	f := NewFleet(t, env, Fast)
	start := time.Now()
	for range 4 {
		f.Start(t)
	}
	ps.WaitConverged(t, start, firstConvergence, "4 replicas: every parent synced")
	since := ps.Bump(t) // settle: every parent synced by its replica of four
	ps.WaitConverged(t, since, moveBound(Fast), "4 replicas: every parent synced after a change")

	victim := busiest(t, f, h, since)
	f.Kill(t, victim)
	ps.Bump(t)
	ps.WaitConverged(t, victim.Removed, moveBound(Fast), "after SIGKILL of one of 4: every parent synced after a change")
	reportMoves(t, h.Calls(), victim, ps.Value)
	WaitCallsMatchLeases(t, h, f, ps, moveBound(Fast))
	CheckCalls(t, h.Calls(), f, ps.Keys)
}

// Slow is the timing of the rolling scenario: a lease long enough that a
// handover well within it cannot be a wait for expiry.
var Slow = Timing{LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 500 * time.Millisecond}

// Roll runs 3 replicas with a 30s lease and SIGTERMs the one called for
// the most parents: it exits with code 0, and every parent converges
// after a change within 15 seconds of the SIGTERM, half the lease
// duration (its buckets were released, not left to expire), with no
// double sync.
func Roll(t *testing.T, env *testenv.Environment) {
	const test = "roll"
	h := NewHook(t)
	Controller(t, env, test, ThingsGVR, h)
	ps := NamespacedParents(t, env, test, Namespaces(t, env, Small.Namespaces), Small.PerNamespace)
	f := NewFleet(t, env, Slow)
	start := time.Now()
	for range 3 {
		f.Start(t)
	}
	ps.WaitConverged(t, start, firstConvergence, "3 replicas: every parent synced")
	since := ps.Bump(t)
	ps.WaitConverged(t, since, moveBound(Fast), "3 replicas: every parent synced after a change")

	victim := busiest(t, f, h, since)
	f.Term(t, victim)
	t.Logf("SIGTERM: exited after %v", time.Since(victim.Removed).Round(100*time.Millisecond))
	ps.Bump(t)
	ps.WaitConverged(t, victim.Removed, Slow.LeaseDuration/2, "after SIGTERM of one of 3: every parent synced after a change")
	reportMoves(t, h.Calls(), victim, ps.Value)
	WaitCallsMatchLeases(t, h, f, ps, moveBound(Fast))
	CheckCalls(t, h.Calls(), f, ps.Keys)
}

// TwoFourThree scales 2 -> 4 -> 3 (the last by SIGTERM): after each step
// every parent converges after a change within moveBound, with no double
// sync.
func TwoFourThree(t *testing.T, env *testenv.Environment) {
	const test = "two-four-three"
	h := NewHook(t)
	Controller(t, env, test, ThingsGVR, h)
	ps := NamespacedParents(t, env, test, Namespaces(t, env, Small.Namespaces), Small.PerNamespace)
	f := NewFleet(t, env, Fast)
	start := time.Now()
	f.Start(t)
	f.Start(t)
	ps.WaitConverged(t, start, firstConvergence, "2 replicas: every parent synced")
	f.Start(t)
	f.Start(t)
	since := ps.Bump(t)
	ps.WaitConverged(t, since, moveBound(Fast), "2 -> 4 replicas: every parent synced after a change")
	victim := busiest(t, f, h, since)
	f.Term(t, victim)
	ps.Bump(t)
	ps.WaitConverged(t, victim.Removed, moveBound(Fast), "4 -> 3 replicas: every parent synced after a change")
	WaitCallsMatchLeases(t, h, f, ps, moveBound(Fast))
	CheckCalls(t, h.Calls(), f, ps.Keys)
}

// ClusterScoped runs a ClusterThing parent with ConfigMap children in 4
// namespaces on 2 replicas: it converges, its children are created and
// updated, by one replica at a time (the cluster bucket's); after the
// replica that syncs it is SIGTERMed, the other takes it over and it
// converges after a change within moveBound.
func ClusterScoped(t *testing.T, env *testenv.Environment) {
	const test = "cluster-scoped"
	h := NewHook(t)
	Controller(t, env, test, ClusterThingsGVR, h)
	ps := ClusterParent(t, env, test, Namespaces(t, env, 4))
	f := NewFleet(t, env, Fast)
	start := time.Now()
	f.Start(t)
	f.Start(t)
	ps.WaitConverged(t, start, firstConvergence, "cluster-scoped parent: children created")
	since := ps.Bump(t)
	ps.WaitConverged(t, since, moveBound(Fast), "cluster-scoped parent: children updated")
	victim := busiest(t, f, h, since)
	f.Term(t, victim)
	ps.Bump(t)
	ps.WaitConverged(t, victim.Removed, moveBound(Fast), "cluster-scoped parent: children updated by the other replica")
	WaitCallsMatchLeases(t, h, f, ps, moveBound(Fast))
	CheckCalls(t, h.Calls(), f, ps.Keys)
}

// busiest returns the running replica called for the most parents since
// a time, and fails if none was.
func busiest(t *testing.T, f *Fleet, h *Hook, since time.Time) *Replica {
	t.Helper()
	spread := Spread(h.Calls(), since)
	var best *Replica
	for _, r := range f.Running() {
		if spread[r.Identity] > 0 && (best == nil || spread[r.Identity] > spread[best.Identity]) {
			best = r
		}
	}
	if best == nil {
		t.Fatalf("no running replica was called since %s: %v", stamp(since), spread)
	}
	t.Logf("removing %s, called for %d parents (of %v)", best.Identity, spread[best.Identity], spread)
	return best
}

// reportMoves logs, of the parents last synced by the removed replica,
// how long after its removal the first call with value came (CheckCalls
// checks who made it).
func reportMoves(t *testing.T, calls []Call, removed *Replica, value int64) {
	t.Helper()
	owned := map[string]bool{}
	for p, r := range LastReplica(calls, removed.Removed) {
		owned[p] = r == removed.Identity
	}
	first := map[string]time.Duration{}
	var slowest time.Duration
	for _, c := range calls {
		if c.Start.Before(removed.Removed) {
			continue
		}
		if _, seen := first[c.Parent]; owned[c.Parent] && !seen && c.Value == value {
			first[c.Parent] = c.Start.Sub(removed.Removed)
			slowest = max(slowest, first[c.Parent])
		}
	}
	t.Logf("the removed replica's %d parents: first synced by another replica at most %v after its removal", len(first), slowest.Round(100*time.Millisecond))
}

// checkFilterMode fails unless some replica reports, in
// metactl_shard_filter_mode, want for the parents' resource, and none
// reports the other mode (a replica that holds no bucket may report
// none).
func checkFilterMode(t *testing.T, replicas []*Replica, want Mode) {
	t.Helper()
	wantLine := fmt.Sprintf(`mode="%s"`, want)
	var seen []string
	ok := false
	for _, r := range replicas {
		lines, err := filterModeLines(r.Metrics)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, l := range lines {
			seen = append(seen, l)
			switch {
			case strings.Contains(l, wantLine) && strings.HasSuffix(l, " 1"):
				ok = true
			case !strings.HasSuffix(l, " 0"):
				t.Errorf("%s: %s, want only mode %q", r.Identity, l, want)
			}
		}
	}
	if !ok {
		t.Errorf("no replica has a metactl_shard_filter_mode sample of things with %s and value 1: %v", wantLine, seen)
	}
}

// filterModeLines returns the metactl_shard_filter_mode samples of the
// things resource at url.
func filterModeLines(url string) ([]string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "metactl_shard_filter_mode{") && strings.Contains(l, "Resource=things") {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}
