package shardtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/shard"
	"github.com/metactl/metactl/internal/testenv"
)

// CheckCalls fails t with the DoubleSyncs of calls for the parents keys.
func CheckCalls(t *testing.T, calls []Call, f *Fleet, keys []string) {
	t.Helper()
	if problems := DoubleSyncs(calls, f, keys); len(problems) > 0 {
		t.Errorf("%d double syncs (replicas: %v):\n%s", len(problems), replicaList(f), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
}

// DoubleSyncs returns what breaks the sharding's promise in calls, the
// hook's record (by start time), for the parents keys:
//
//   - every call names a replica of the fleet (Metactl-Replica);
//   - no two calls by different replicas for one parent overlap in time;
//   - between two removals of replicas (and before the first, after the
//     last), a parent that moved from replica A to another is never
//     called for by A again: while replicas only join, a bucket moves only
//     to the joining replica. A removal may send a bucket back to a
//     replica that held it before.
func DoubleSyncs(calls []Call, f *Fleet, keys []string) []string {
	ids := f.Identities()
	removals := f.Removals()
	wanted := map[string]bool{}
	for _, k := range keys {
		wanted[k] = true
	}
	var problems []string
	byParent := map[string][]Call{}
	for _, c := range calls {
		if !wanted[c.Parent] {
			continue
		}
		if !ids[c.Replica] {
			problems = append(problems, fmt.Sprintf("%s: called at %s with Metactl-Replica %q, not a replica of this test", c.Parent, stamp(c.Start), c.Replica))
			continue
		}
		byParent[c.Parent] = append(byParent[c.Parent], c)
	}
	for _, k := range keys {
		cs := byParent[k] // by start time
		for i, c := range cs {
			for _, d := range cs[:i] {
				if d.Replica != c.Replica && c.Start.Before(d.End) {
					problems = append(problems, fmt.Sprintf("%s: overlapping calls by %s (%s-%s) and %s (%s-%s)",
						k, d.Replica, stamp(d.Start), stamp(d.End), c.Replica, stamp(c.Start), stamp(c.End)))
				}
			}
		}
		left := map[string]bool{}
		prev, cur := "", 0
		for _, c := range cs {
			if p := phase(c.Start, removals); p != cur {
				clear(left)
				cur = p
			}
			if c.Replica != prev {
				if left[c.Replica] {
					problems = append(problems, fmt.Sprintf("%s: called by %s at %s after the parent had moved from %s to another replica, with no replica removed since",
						k, c.Replica, stamp(c.Start), c.Replica))
				}
				if prev != "" {
					left[prev] = true
				}
				prev = c.Replica
			}
		}
	}
	return problems
}

// phase is the number of removals before t.
func phase(t time.Time, removals []time.Time) int {
	n := 0
	for _, r := range removals {
		if r.Before(t) {
			n++
		}
	}
	return n
}

// Spread returns, for the calls that started after since, the number of
// parents each replica was called for.
func Spread(calls []Call, since time.Time) map[string]int {
	parents := map[string]map[string]bool{}
	for _, c := range calls {
		if c.Start.Before(since) {
			continue
		}
		if parents[c.Replica] == nil {
			parents[c.Replica] = map[string]bool{}
		}
		parents[c.Replica][c.Parent] = true
	}
	out := map[string]int{}
	for r, ps := range parents {
		out[r] = len(ps)
	}
	return out
}

// LastReplica returns, for each parent, the replica of its last call that
// started before t.
func LastReplica(calls []Call, t time.Time) map[string]string {
	out := map[string]string{}
	for _, c := range calls {
		if c.Start.Before(t) {
			out[c.Parent] = c.Replica
		}
	}
	return out
}

func replicaList(f *Fleet) []string {
	var out []string
	for i, r := range f.Replicas {
		s := fmt.Sprintf("%d=%s", i+1, r.Identity)
		if !r.Removed.IsZero() {
			s += " (removed " + stamp(r.Removed) + ")"
		}
		out = append(out, s)
	}
	return slices.Clip(out)
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

// WaitCallsMatchLeases waits up to timeout until, for every parent of ps,
// the replica of the last call the hook saw holds the Lease of the
// parent's bucket (shard.Of of its namespace; the cluster bucket for a
// cluster-scoped parent): the witness agrees with the Leases. A bucket
// that moved in between is synced by its gainer, whose call makes them
// agree again.
func WaitCallsMatchLeases(t *testing.T, h *Hook, f *Fleet, ps *Parents, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "the last call for every parent to be by its bucket's holder", func(ctx context.Context) (bool, error) {
		holders, err := f.holders(ctx)
		if err != nil {
			return false, err
		}
		last := LastReplica(h.Calls(), time.Now())
		var wrong []string
		for _, k := range ps.Keys {
			ns, _ := split(k)
			b := -1
			if ns != "" {
				b = int(shard.Of(ns, Buckets))
			}
			lease := f.BucketLease(b)
			if holders[lease] == "" || last[k] != holders[lease] {
				wrong = append(wrong, fmt.Sprintf("%s: last called by %q, Lease %s held by %q", k, last[k], lease, holders[lease]))
			}
		}
		if len(wrong) > 0 {
			return false, fmt.Errorf("%d parents: %s", len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "; "))
		}
		return true, nil
	})
}
