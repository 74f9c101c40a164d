package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/shard"
)

// The generated namespaces spread over the buckets (docs/scaling.md,
// "Skew"), where sequential names would not; they are DNS labels and the
// same in every run.
func TestGeneratedNamespacesSpread(t *testing.T) {
	s := bucketSpread(10000, 100, 32)
	// 100 namespaces thrown at random into 32 buckets leave about 1.3
	// empty; FNV-1a on sequential suffixes leaves all but one or two.
	if s.Used < 28 {
		t.Errorf("100 generated namespaces use %d of 32 buckets (%s)", s.Used, s)
	}
	seq := map[shard.Bucket]bool{}
	for j := range 100 {
		seq[shard.Of(fmt.Sprintf("bench-%d", j), 32)] = true
	}
	if len(seq) >= s.Used {
		t.Errorf("sequential names use %d buckets, generated ones %d: the test does not show the skew", len(seq), s.Used)
	}
	if s.MinParents < 1 || s.MaxParents > 10000 {
		t.Errorf("spread %s", s)
	}
	names := parentNamespaces(options{namespaces: 100})
	if len(names) != 100 || len(slices.Compact(slices.Sorted(slices.Values(names)))) != 100 {
		t.Errorf("namespaces not 100 distinct: %v", names)
	}
	for _, n := range names {
		if len(n) > 63 || strings.ToLower(n) != n || !strings.HasPrefix(n, "bench-") {
			t.Errorf("namespace %q is not a bench DNS label", n)
		}
	}
	first := generatedNamespace(7)
	if again := generatedNamespace(7); again != first || parentNamespace(107, 100) != first {
		t.Error("the layout is not stable")
	}
	if parentNamespace(5, 0) != nsMetactl {
		t.Errorf("without -namespaces parent 5 is in %q", parentNamespace(5, 0))
	}
}

func TestParseFlagsReplicas(t *testing.T) {
	o := parseArgs(t, "-n", "10")
	if len(o.replicaCounts) != 0 || o.namespaces != 0 || o.shardBuckets != 0 || len(o.variants) != 0 {
		t.Errorf("without replica flags: counts %v, namespaces %d, buckets %d, variants %v: not today's layout", o.replicaCounts, o.namespaces, o.shardBuckets, o.variants)
	}
	o = parseArgs(t, "-n", "10", "-replicas", "2")
	if !slices.Equal(o.replicaCounts, []int{2}) || o.namespaces != defaultNamespaces || o.shardBuckets != defaultShardBuckets {
		t.Errorf("-replicas 2: counts %v, namespaces %d, buckets %d", o.replicaCounts, o.namespaces, o.shardBuckets)
	}
	if len(o.variants) != 1 || o.variants[0].Name != "r2" || o.variants[0].Replicas != 2 {
		t.Errorf("-replicas 2: variants %+v", o.variants)
	}
	o = parseArgs(t, "-n", "10", "-replica-counts", "1,2,4", "-namespaces", "20", "-shard-buckets", "16", "-kill-one")
	var names []string
	for _, v := range o.variants {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"r1", "r2", "r4"}) || o.namespaces != 20 || o.shardBuckets != 16 || !o.killOne {
		t.Errorf("-replica-counts 1,2,4: variants %v, namespaces %d, buckets %d", names, o.namespaces, o.shardBuckets)
	}
	for _, bad := range [][]string{
		{"-replicas", "2", "-replica-counts", "1,2"},
		{"-replica-counts", "1,x"},
		{"-replica-counts", "2,2"},
		{"-replicas", "0"},
		{"-kill-one"},
		{"-replicas", "1", "-kill-one"},
		{"-shard-buckets", "8"},
		{"-replicas", "2", "-shard-buckets", "2000"},
	} {
		if err := parseArgsErr(append([]string{"-n", "10"}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// parseArgsErr is parseFlags' error for args.
func parseArgsErr(args ...string) error {
	oldArgs, oldFlags := os.Args, flag.CommandLine
	defer func() { os.Args, flag.CommandLine = oldArgs, oldFlags }()
	os.Args = append([]string{"bench"}, args...)
	flag.CommandLine = flag.NewFlagSet("bench", flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	_, err := parseFlags()
	return err
}

func TestAnalyzeCalls(t *testing.T) {
	t0 := time.Unix(1000, 0)
	call := func(parent, replica string, from, to int) hookCall {
		return hookCall{Parent: parent, Replica: replica, Start: t0.Add(time.Duration(from) * time.Millisecond), End: t0.Add(time.Duration(to) * time.Millisecond)}
	}
	// a: one replica throughout; b: handed over once (A then B, not
	// overlapping): neither is a double sync.
	ok := []hookCall{call("ns/a", "A", 0, 5), call("ns/a", "A", 10, 15), call("ns/b", "A", 0, 5), call("ns/b", "B", 20, 25), call("ns/b", "B", 30, 31)}
	c := analyzeCalls(ok)
	if !c.Known || c.DoubleSyncs != 0 || c.ParentsByManyReplicas != 1 || c.ByReplica["A"] != 3 || c.ByReplica["B"] != 2 {
		t.Errorf("a handover: %+v", c)
	}
	// c: calls of A and B overlap; d: A, B, A.
	bad := append(slices.Clone(ok), call("ns/c", "A", 0, 10), call("ns/c", "B", 5, 12), call("ns/d", "A", 0, 1), call("ns/d", "B", 2, 3), call("ns/d", "A", 4, 5))
	c = analyzeCalls(bad)
	if !c.Known || c.DoubleSyncs != 2 || c.Overlapping != 1 || c.Interleaved != 1 || !strings.HasPrefix(c.Example, "ns/c:") {
		t.Errorf("two double syncs: %+v", c)
	}
	// Calls of one replica may overlap (a retry while the first is
	// answered): not a double sync.
	c = analyzeCalls([]hookCall{call("ns/e", "A", 0, 10), call("ns/e", "A", 5, 12)})
	if c.DoubleSyncs != 0 {
		t.Errorf("one replica's overlapping calls: %+v", c)
	}
	// Without the header, unknown rather than zero.
	c = analyzeCalls(append(slices.Clone(bad), call("ns/f", "", 0, 1)))
	if c.Known || c.DoubleSyncs != 0 || c.CallsWithoutHeader != 1 || c.Problem == "" {
		t.Errorf("a call without the header: %+v", c)
	}
}

// The double-sync target passes at 0, fails above, and is unknown (SKIP,
// not PASS) when the header is missing; the kill target is judged
// against lease duration + 10 s.
func TestReplicaTargets(t *testing.T) {
	zero, two := 0, 2
	status := func(f *ReplicaFigures) map[string]string {
		b := &bench{result: newResult(options{n: 10, runs: 1, countsOnly: true})}
		b.result.Variants = []*VariantResult{{variant: variant{Name: "r2", Replicas: 2}, PerReplica: f}}
		out := map[string]string{}
		for _, tg := range b.replicaTargets() {
			out[tg.Name] = tg.Status
		}
		return out
	}
	find := func(m map[string]string, prefix string) string {
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				return v
			}
		}
		return "missing"
	}
	if s := find(status(&ReplicaFigures{Replicas: 2, DoubleSyncs: &zero}), "r2: no parent synced by two replicas"); s != "PASS" {
		t.Errorf("0 double syncs: %s", s)
	}
	if s := find(status(&ReplicaFigures{Replicas: 2, DoubleSyncs: &two}), "r2: no parent synced by two replicas"); s != "FAIL" {
		t.Errorf("2 double syncs: %s", s)
	}
	if s := find(status(&ReplicaFigures{Replicas: 2}), "r2: no parent synced by two replicas"); s != "SKIP" {
		t.Errorf("unknown double syncs: %s", s)
	}
	kill := func(resynced float64) string {
		return find(status(&ReplicaFigures{Replicas: 2, DoubleSyncs: &zero, Kills: []KillResult{{Round: 1, BucketsFrom: "metrics", KilledParents: 5,
			LeaseDurationSeconds: 15, KilledParentsResyncedSeconds: resynced, KilledParentsConvergedSeconds: 80}}}), "r2: kill round 1")
	}
	if s := kill(20); s != "PASS" {
		t.Errorf("synced again after 20s of a 15s lease: %s", s)
	}
	if s := kill(26); s != "FAIL" {
		t.Errorf("synced again after 26s of a 15s lease: %s", s)
	}
	if s := kill(-1); s != "FAIL" {
		t.Errorf("a parent never synced again: %s", s)
	}
	// Under -counts-only the share targets are skipped, not passed.
	f := &ReplicaFigures{Replicas: 2, DoubleSyncs: &zero, RatioTo: "r1", PeakRSSRatio: 0.9, CPURatio: 0.5}
	if s := find(status(f), "r2: per-replica peak RSS <= 0.60x"); s != "SKIP" {
		t.Errorf("peak RSS share with -counts-only: %s", s)
	}
}

func TestByReplicaAgree(t *testing.T) {
	rs := []ReplicaPhase{{HookCalls: 300}, {HookCalls: 0}, {HookCalls: 500}}
	if ok, detail := byReplicaAgree(rs, map[string]int64{"b": 500, "a": 300}); !ok {
		t.Errorf("same counts: %s", detail)
	}
	if ok, _ := byReplicaAgree(rs, map[string]int64{"b": 499, "a": 301}); ok {
		t.Error("one call counted by the wrong replica agrees")
	}
	if ok, _ := byReplicaAgree(rs, map[string]int64{"a": 800}); ok {
		t.Error("two replicas under one header agree")
	}
}

// Lease writes are the API writes beyond the object writes, at most the
// Lease writes kube-apiserver served: more stays an API write, and the
// counts disagree.
func TestLeaseWrites(t *testing.T) {
	r := &PhaseResult{Parents: 100, APIWrites: 405, ObjectWritesTotal: 400, APIMetricExported: true,
		ServerWrites: map[string]float64{"PUT leases": 7, "POST configmaps": 300, "PATCH benchparents/status": 100, "POST benchparents": 100}}
	if got := leaseWrites(r); got != 5 {
		t.Errorf("lease writes %v, want 5", got)
	}
	r.LeaseWrites = leaseWrites(r)
	if c := metactlCountCheck("run 1", "create", r); !c.Agree {
		t.Errorf("5 lease writes of 7 served: %s", c.Problem)
	}
	r.ServerWrites["PUT leases"] = 2
	r.LeaseWrites = leaseWrites(r)
	if c := metactlCountCheck("run 1", "create", r); c.Agree {
		t.Error("5 writes beyond the object writes, 2 Lease writes served: the counts agree")
	}
}
