package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Multi-replica mode (issue 31, docs/scaling.md): each number K of
// -replica-counts (or -replicas K) is a variant "r<K>" run beside the
// default in every round, as K metactl processes with --leader-elect
// --shard-buckets, which share the parents among themselves. Its rounds,
// counts and witnesses are a variant's (variant.go), over the replicas
// together (their metrics added up); per replica it also records CPU,
// peak RSS, cached objects, hook calls and watch events, and the hook
// server records who called for which parent when (the double-sync
// witness).

const (
	// defaultShardBuckets is -shard-buckets' default, the Helm chart's.
	defaultShardBuckets = 32
	// defaultNamespaces is -namespaces' default with replicas: the
	// issue's "at least 100 namespaces".
	defaultNamespaces = 100
	// leaseNamespace holds the replicas' Leases.
	leaseNamespace = nsMetactl
	// shardedListAndWatchGate is kube-apiserver's feature gate of
	// KEP-5866.
	shardedListAndWatchGate = "ShardedListAndWatch"
)

// setReplicas checks and completes the multi-replica options from
// -replicas and -replica-counts.
func (o *options) setReplicas(replicas int, counts string) error {
	if replicas < 1 {
		return errors.New("-replicas must be at least 1")
	}
	for _, c := range strings.Split(counts, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		k, err := strconv.Atoi(c)
		if err != nil || k < 1 {
			return fmt.Errorf("-replica-counts: %q is not a positive number", c)
		}
		if slices.Contains(o.replicaCounts, k) {
			return fmt.Errorf("-replica-counts: %d twice", k)
		}
		o.replicaCounts = append(o.replicaCounts, k)
	}
	switch {
	case replicas > 1 && len(o.replicaCounts) > 0:
		return errors.New("-replicas and -replica-counts: give one")
	case replicas > 1:
		o.replicaCounts = []int{replicas}
	}
	multi := len(o.replicaCounts) > 0
	if o.shardBuckets == 0 && multi {
		o.shardBuckets = defaultShardBuckets
	}
	if o.shardBuckets < 0 || o.shardBuckets > 1024 {
		return fmt.Errorf("-shard-buckets %d: want 1 to 1024", o.shardBuckets)
	}
	if o.shardBuckets > 0 && !multi {
		return errors.New("-shard-buckets needs -replicas or -replica-counts")
	}
	if o.namespaces < 0 {
		o.namespaces = 0
		if multi {
			o.namespaces = defaultNamespaces
		}
	}
	if o.killOne && slices.Max(append([]int{0}, o.replicaCounts...)) < 2 {
		return errors.New("-kill-one needs 2 or more replicas")
	}
	if o.leaseDuration < 2*time.Second {
		return errors.New("-lease-duration must be at least 2s")
	}
	return nil
}

// replicaVariants are the variants of -replica-counts, in its order.
func replicaVariants(o options) []variant {
	var out []variant
	for _, k := range o.replicaCounts {
		out = append(out, variant{Name: fmt.Sprintf("r%d", k), Spec: fmt.Sprintf("%d replicas, --shard-buckets=%d", k, o.shardBuckets), Replicas: k})
	}
	return out
}

// apiServerFlags are kube-apiserver's flags beyond the control plane's.
func apiServerFlags(o options) map[string]string {
	if !o.shardedListAndWatch {
		return nil
	}
	return map[string]string{"feature-gates": shardedListAndWatchGate + "=true"}
}

// replicaArgs are the arguments of every replica of vs's run in round:
// the Leases are named for the run, so that no run sees the members and
// buckets of an earlier one (a killed replica's member Lease outlives it
// by the lease duration).
func (b *bench) replicaArgs(vs *variantState, round int) []string {
	d := b.o.leaseDuration
	args := []string{
		"--leader-elect",
		"--leader-elect-namespace=" + leaseNamespace,
		"--leader-elect-lease-name=" + leaseName(vs, round),
		"--leader-elect-lease-duration=" + d.String(),
		fmt.Sprintf("--shard-buckets=%d", b.o.shardBuckets),
	}
	if d < 15*time.Second {
		// metactl's defaults (10s, 2s) fit a 15s lease: keep their
		// proportions.
		args = append(args, "--leader-elect-renew-deadline="+(d*2/3).String(), "--leader-elect-retry-period="+(d*2/15).String())
	}
	return append(args, vs.Args...)
}

// leaseName names the Leases of vs's run in round.
func leaseName(vs *variantState, round int) string { return fmt.Sprintf("bench-%s-%d", vs.Name, round) }

// procs are the metactl processes running now: a sharded variant's
// replicas, else the one metactl (none before it starts).
func (b *bench) procs() []*metactlProcess {
	if len(b.replicas) > 0 {
		return b.replicas
	}
	if b.metactl != nil {
		return []*metactlProcess{b.metactl}
	}
	return nil
}

// sharded reports whether a sharded variant runs now.
func (b *bench) sharded() bool { return b.cur != nil && b.cur.Replicas > 0 }

// scrapeEach scrapes every running metactl, in procs' order.
func (b *bench) scrapeEach(ctx context.Context) ([]snapshot, error) {
	var out []snapshot
	for i, p := range b.procs() {
		s, err := p.scrape(ctx)
		if err != nil {
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// concat joins scrapes: its sums are over every process.
func concat(ss []snapshot) snapshot {
	if len(ss) == 1 {
		return ss[0]
	}
	var out snapshot
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

// scrapeAll is every running metactl's metrics together.
func (b *bench) scrapeAll(ctx context.Context) (snapshot, error) {
	ss, err := b.scrapeEach(ctx)
	if err != nil {
		return nil, err
	}
	return concat(ss), nil
}

// settleAll waits until every running metactl is quiet at once (for
// replicas, see shardedActivity).
func (b *bench) settleAll(ctx context.Context) (snapshot, error) {
	if len(b.replicas) == 0 {
		return b.metactl.settle(ctx, b.cpProcs)
	}
	return settleOn(ctx, b.scrapeAll, shardedActivity)
}

// shardedActivity is activity without the API writes, which sharded
// replicas never stop making: they renew their member and bucket Leases
// every retry period, and metactl_api_requests_total cannot tell those
// apart. Their object writes (children and status) count instead.
func shardedActivity(s snapshot) float64 {
	return s.sum("metactl_hook_requests_total") + s.sum("metactl_object_writes_total") + s.sum("metactl_syncs_total")
}

// readProcs reads every running metactl's /proc figures.
func (b *bench) readProcs() ([]ProcStats, error) {
	var out []ProcStats
	for i, p := range b.procs() {
		st, err := readProc(p.PID)
		if err != nil {
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		out = append(out, st)
	}
	return out, nil
}

// exited returns an error once any running metactl has stopped.
func (b *bench) exited() error {
	for _, p := range b.procs() {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

func sumCPU(ps []ProcStats) float64 {
	t := 0.0
	for _, p := range ps {
		t += p.CPUSeconds
	}
	return t
}

func maxOf(ps []ProcStats, f func(ProcStats) int64) int64 {
	var m int64
	for _, p := range ps {
		m = max(m, f(p))
	}
	return m
}

// startReplicas starts vs's replicas for round, each with its own ports
// and log; on an error it stops those it started.
func (b *bench) startReplicas(ctx context.Context, bin string, vs *variantState, round int) ([]*metactlProcess, error) {
	args := b.replicaArgs(vs, round)
	b.replicaIDs = nil
	var procs []*metactlProcess
	for i := range vs.Replicas {
		logPath := filepath.Join(b.outDir, fmt.Sprintf("%s-%s-r%d-replica%d-metactl.log", b.o.label, vs.Name, round, i))
		// Only the first replica is profiled: one profile per run, as
		// without replicas.
		p, err := startMetactl(ctx, bin, b.cp.KubeconfigPath, logPath, b.o.profile && i == 0, args, variantEnv(os.Environ(), vs.variant, ""))
		if err != nil {
			for _, q := range procs {
				q.Stop()
			}
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		procs = append(procs, p)
		b.replicaIDs = append(b.replicaIDs, b.newMember(ctx, vs, round, p))
	}
	return procs, nil
}

// memberLabel marks the replicas' member Leases; its value is the lease
// name (docs/scaling.md).
const memberLabel = "metactl.io/shard-member"

// newMember returns the identity of the replica just started, p: the
// holder of the member Lease that is not one of the replicas started
// before it, waited for up to 30 seconds (the replicas start one at a
// time). Without one, it is the identity p's log names, or "".
func (b *bench) newMember(ctx context.Context, vs *variantState, round int, p *metactlProcess) string {
	known := map[string]bool{}
	for _, id := range b.replicaIDs {
		known[id] = true
	}
	sel := metav1.ListOptions{LabelSelector: memberLabel + "=" + leaseName(vs, round)}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil && p.Exited() == nil {
		list, err := b.kube.CoordinationV1().Leases(leaseNamespace).List(ctx, sel)
		if err == nil {
			for _, l := range list.Items {
				if id := ptr.Deref(l.Spec.HolderIdentity, ""); id != "" && !known[id] {
					return id
				}
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	id := logIdentity(p)
	logf("no new member Lease %s within 30s; identity from the log: %q", sel.LabelSelector, id)
	return id
}

// identity is replica i's identity, "" when unknown.
func (b *bench) identity(i int) string {
	if i < len(b.replicaIDs) {
		return b.replicaIDs[i]
	}
	return ""
}

// bucketsOwned returns the buckets a replica's metrics say it owns
// (metactl_shard_bucket_owned{bucket} = 1), and whether it exports the
// metric at all.
func bucketsOwned(s snapshot) ([]string, bool) {
	var out []string
	for _, x := range s {
		if x.name == "metactl_shard_bucket_owned" && x.value == 1 {
			bk := x.labels["bucket"]
			if i, err := strconv.Atoi(bk); err == nil {
				bk = strconv.Itoa(i) // "007" is bucket 7
			}
			out = append(out, bk)
		}
	}
	slices.SortFunc(out, compareBuckets)
	return out, s.hasMetric("metactl_shard_bucket_owned")
}

// compareBuckets orders bucket labels by number, "cluster" last.
func compareBuckets(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return x - y
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// waitOwned waits until the replicas own every hash bucket exactly once
// between them, twice in a row a second apart, and each has the bench
// controller ready (metactl_controller_ready), so that a wave starts with
// the buckets settled rather than measuring their first assignment.
// Without the metrics it returns at once; after two lease durations and
// 30 seconds it logs what it saw and returns.
func (b *bench) waitOwned(ctx context.Context) error {
	deadline := time.Now().Add(2*b.o.leaseDuration + 30*time.Second)
	last, stable := "", 0
	for {
		ss, err := b.scrapeEach(ctx)
		if err != nil {
			return err
		}
		owners := map[string]int{}
		exported, ready := false, true
		var parts []string
		for i, s := range ss {
			owned, ok := bucketsOwned(s)
			exported = exported || ok
			for _, bk := range owned {
				owners[bk]++
			}
			parts = append(parts, fmt.Sprintf("replica %d: %d", i, len(owned)))
			if s.hasMetric("metactl_controller_ready") && s.sum("metactl_controller_ready", "controller", ccName) != 1 {
				ready = false
			}
		}
		if !exported {
			logf("the replicas export no metactl_shard_bucket_owned: not waiting for the buckets to settle")
			return nil
		}
		whole := true
		for bk := range b.o.shardBuckets {
			whole = whole && owners[strconv.Itoa(bk)] == 1
		}
		state := strings.Join(parts, ", ")
		switch {
		case whole && ready && state == last:
			stable++
		case whole && ready:
			stable = 1
		default:
			stable = 0
		}
		last = state
		if stable >= 2 {
			logf("buckets settled: %s", state)
			return nil
		}
		if time.Now().After(deadline) {
			logf("the buckets did not settle (%s; every bucket owned once: %v, controllers ready: %v); measuring anyway", state, whole, ready)
			return nil
		}
		sleep(ctx, time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// identityRE finds a replica's identity in its log (the Lease holder
// identity it logs, hostname_uuid).
var identityRE = regexp.MustCompile(`identity="?([A-Za-z0-9._-]+_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)

// logIdentity returns the identity a replica's log names, "" if none.
func logIdentity(p *metactlProcess) string {
	data, err := os.ReadFile(p.Log.Name())
	if err != nil {
		return ""
	}
	if m := identityRE.FindSubmatch(data); m != nil {
		return string(m[1])
	}
	return ""
}

// leaseWrites are the write requests metactl made beyond its object
// writes, which sharded replicas make to their Leases
// (metactl_api_requests_total has no resource label to tell them apart):
// at most the Lease writes kube-apiserver served in the phase, which also
// counts its own and the control plane's. Any excess beyond those stays
// in the API writes and makes the counts disagree.
func leaseWrites(r *PhaseResult) float64 {
	server := 0.0
	for k, v := range r.ServerWrites {
		if _, resource, _ := strings.Cut(k, " "); resource == "leases" {
			server += v
		}
	}
	return min(max(0, r.APIWrites-r.ObjectWritesTotal), server)
}

// ReplicaPhase is one replica's share of a phase.
type ReplicaPhase struct {
	Replica int `json:"replica"`
	PID     int `json:"pid"`
	// Identity is its Lease identity as its log names it ("" unknown).
	Identity              string  `json:"identity,omitempty"`
	CPUSeconds            float64 `json:"cpuSeconds"`
	CPUSecondsToConverged float64 `json:"cpuSecondsToConverged"`
	RSSBytes              int64   `json:"rssBytes"`
	// PeakRSSBytes is VmHWM over the process's life until the phase's end.
	PeakRSSBytes int64 `json:"peakRssBytes"`
	// HookCalls, Syncs and ObjectWrites are its own metrics' counts.
	HookCalls    float64 `json:"hookCalls"`
	Syncs        float64 `json:"syncs"`
	ObjectWrites float64 `json:"objectWrites"`
	// HookCallsSeen is the calls the hook server received with its
	// identity in the Metactl-Replica header; nil when its identity is
	// unknown.
	HookCallsSeen *int64 `json:"hookCallsSeenByHook,omitempty"`
	// CachedObjects is metactl_informer_objects summed over resources
	// once quiet, CachedByResource by resource.
	CachedObjects    float64            `json:"cachedObjects"`
	CachedByResource map[string]float64 `json:"cachedByResource,omitempty"`
	// WatchEvents is the watch events it received during the phase,
	// from the first metactl_* metric whose name has "watch_events";
	// nil when it exports none (then only kube-apiserver's total over
	// every watcher, serverWatchEvents, is known).
	WatchEvents *float64 `json:"watchEvents,omitempty"`
	// BucketsOwned are its buckets once quiet
	// (metactl_shard_bucket_owned); FilterModes its
	// metactl_shard_filter_mode by resource/mode.
	BucketsOwned []string           `json:"bucketsOwned,omitempty"`
	FilterModes  map[string]float64 `json:"filterModes,omitempty"`
	// Parents is its metactl_shard_bucket_parents summed over its
	// buckets once quiet, Members the live members it saw then
	// (metactl_shard_members), Handovers its
	// metactl_shard_handovers_total during the phase by direction, when
	// exported.
	Parents   float64            `json:"parents,omitempty"`
	Members   float64            `json:"members,omitempty"`
	Handovers map[string]float64 `json:"handovers,omitempty"`
}

// watchEventsMetric returns the first metactl_* counter of watch events
// a scrape has, "" if none.
func watchEventsMetric(s snapshot) string {
	for _, x := range s {
		if strings.HasPrefix(x.name, "metactl_") && strings.Contains(x.name, "watch_events") {
			return x.name
		}
	}
	return ""
}

// replicaFigures fills r's per-replica figures and the hook server's
// record of its callers.
func (b *bench) replicaFigures(r *PhaseResult, before, after []snapshot, procBefore, procConverged, procAfter []ProcStats) {
	calls := b.hook.take()
	ids := map[string]int{}
	for i, p := range b.procs() {
		x := ReplicaPhase{Replica: i, PID: p.PID, Identity: b.identity(i)}
		if i < len(procAfter) && i < len(procBefore) {
			x.CPUSeconds = round3(procAfter[i].CPUSeconds - procBefore[i].CPUSeconds)
			x.RSSBytes, x.PeakRSSBytes = procAfter[i].RSSBytes, procAfter[i].PeakRSSBytes
			if i < len(procConverged) {
				x.CPUSecondsToConverged = round3(procConverged[i].CPUSeconds - procBefore[i].CPUSeconds)
			}
		}
		if i < len(after) && i < len(before) {
			a, bf := after[i], before[i]
			x.HookCalls = a.sum("metactl_hook_requests_total") - bf.sum("metactl_hook_requests_total")
			x.Syncs = a.sum("metactl_syncs_total") - bf.sum("metactl_syncs_total")
			x.ObjectWrites = a.sum("metactl_object_writes_total") - bf.sum("metactl_object_writes_total")
			x.CachedObjects = a.sum("metactl_informer_objects")
			x.CachedByResource = a.by("metactl_informer_objects", "resource")
			if name := watchEventsMetric(a); name != "" {
				v := a.sum(name) - bf.sum(name)
				x.WatchEvents = &v
			}
			x.BucketsOwned, _ = bucketsOwned(a)
			x.Parents, x.Members = a.sum("metactl_shard_bucket_parents"), a.sum("metactl_shard_members")
			if h := diffBy(a.by("metactl_shard_handovers_total", "direction"), bf.by("metactl_shard_handovers_total", "direction")); len(h) > 0 {
				x.Handovers = h
			}
			if a.hasMetric("metactl_shard_filter_mode") {
				x.FilterModes = a.by("metactl_shard_filter_mode", "resource", "mode")
			}
		}
		if x.Identity != "" {
			ids[x.Identity] = i
		}
		r.Replicas = append(r.Replicas, x)
	}
	c := analyzeCalls(calls)
	calling := 0
	for _, x := range r.Replicas {
		if x.HookCalls > 0 {
			calling++
		}
	}
	if c.Known && len(c.ByReplica) < calling {
		// Replicas that share a header value cannot be told apart.
		c.Known = false
		c.Problem = fmt.Sprintf("%d replicas called the hook, the %s header names %d", calling, replicaHeader, len(c.ByReplica))
	}
	for id, n := range c.ByReplica {
		if i, ok := ids[id]; ok {
			r.Replicas[i].HookCallsSeen = &n
		}
	}
	if c.Known {
		agree, detail := byReplicaAgree(r.Replicas, c.ByReplica)
		c.ByReplicaAgree = &agree
		if !agree {
			c.Problem = "hook calls per replica disagree: " + detail
			logf("%s: hook calls per replica disagree: %s", b.who(), detail)
		}
	}
	r.HookCallers = &c
	b.lastCalls = calls
}

// byReplicaAgree compares, as multisets, each replica's count of its
// hook calls (its metrics) with the hook server's count of each header
// value: a witness of the per-replica counts that needs no replica's
// identity. Replicas without calls are left out.
func byReplicaAgree(rs []ReplicaPhase, byReplica map[string]int64) (bool, string) {
	var ours, hook []int64
	for _, x := range rs {
		if x.HookCalls > 0 {
			ours = append(ours, int64(x.HookCalls))
		}
	}
	for _, n := range byReplica {
		hook = append(hook, n)
	}
	slices.Sort(ours)
	slices.Sort(hook)
	return slices.Equal(ours, hook), fmt.Sprintf("replicas' metrics %v, hook server by %s %v", ours, replicaHeader, hook)
}

// ReplicaFigures are a sharded variant's per-replica figures over its
// rounds: each round's largest and median share of its replicas, the
// medians of the largest over the rounds, and their ratio to one
// replica's.
type ReplicaFigures struct {
	Replicas int `json:"replicas"`
	// Per round: the largest and the median over the replicas of peak
	// RSS (VmHWM after update), CPU for create + update, cached objects
	// after update, hook calls in create + update (its metrics), and
	// watch events received (nil rounds: not exported).
	PeakRSSMax          []int64   `json:"peakRssMax"`
	PeakRSSMedian       []int64   `json:"peakRssMedian"`
	CPUMax              []float64 `json:"cpuMax"`
	CPUMedian           []float64 `json:"cpuMedian"`
	CachedObjectsMax    []float64 `json:"cachedObjectsMax"`
	CachedObjectsMedian []float64 `json:"cachedObjectsMedian"`
	HookCallsMax        []float64 `json:"hookCallsMax"`
	HookCallsMedian     []float64 `json:"hookCallsMedian"`
	WatchEventsMax      []float64 `json:"watchEventsMax,omitempty"`
	// The medians over the rounds of the per-round largest.
	PeakRSSMaxBytes   int64   `json:"peakRssMaxBytes"`
	CPUMaxSeconds     float64 `json:"cpuMaxSeconds"`
	CachedObjectsMaxN float64 `json:"cachedObjectsMaxMedian"`
	HookCallsMaxN     float64 `json:"hookCallsMaxMedian"`
	// RatioTo names the one-replica run the ratios compare with: "r1"
	// (one sharded replica) when measured, else "default" (metactl
	// without sharding); empty when neither ran.
	RatioTo            string             `json:"ratioTo,omitempty"`
	PeakRSSRatio       float64            `json:"peakRssRatio,omitempty"`
	CPURatio           float64            `json:"cpuRatio,omitempty"`
	CachedObjectsRatio float64            `json:"cachedObjectsRatio,omitempty"`
	ConvergenceRatio   map[string]float64 `json:"convergenceRatio,omitempty"`
	// DoubleSyncs is the parents that two replicas called with
	// overlapping or interleaved calls, over every phase and round; nil
	// when some call lacked the Metactl-Replica header (unknown).
	DoubleSyncs      *int   `json:"doubleSyncs"`
	DoubleSyncDetail string `json:"doubleSyncDetail"`
	// Kills are the -kill-one runs.
	Kills []KillResult `json:"kills,omitempty"`
}

// replicaRounds groups a variant's processes by round.
func replicaRounds(procs []VariantProcess) [][]VariantProcess {
	byRound := map[int][]VariantProcess{}
	var rounds []int
	for _, p := range procs {
		if _, ok := byRound[p.Round]; !ok {
			rounds = append(rounds, p.Round)
		}
		byRound[p.Round] = append(byRound[p.Round], p)
	}
	slices.Sort(rounds)
	out := make([][]VariantProcess, 0, len(rounds))
	for _, r := range rounds {
		out = append(out, byRound[r])
	}
	return out
}

// maxMedian is the largest and the median of f over ps.
func maxMedian(ps []VariantProcess, f func(VariantProcess) float64) (float64, float64) {
	xs := make([]float64, 0, len(ps))
	for _, p := range ps {
		xs = append(xs, f(p))
	}
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Max(xs), median(xs)
}

// replicaFiguresOf computes vs's per-replica figures (the killed
// replicas' included: each round's figures are taken before the kill).
func replicaFiguresOf(vs *variantState, k int) *ReplicaFigures {
	f := &ReplicaFigures{Replicas: k}
	for _, round := range replicaRounds(vs.procs) {
		mx, md := maxMedian(round, func(p VariantProcess) float64 { return float64(p.Phases.PeakRSSBytes) })
		f.PeakRSSMax, f.PeakRSSMedian = append(f.PeakRSSMax, int64(mx)), append(f.PeakRSSMedian, int64(md))
		mx, md = maxMedian(round, func(p VariantProcess) float64 { return p.CreateUpdateCPUSeconds })
		f.CPUMax, f.CPUMedian = append(f.CPUMax, round3(mx)), append(f.CPUMedian, round3(md))
		mx, md = maxMedian(round, func(p VariantProcess) float64 { return p.CachedObjects })
		f.CachedObjectsMax, f.CachedObjectsMedian = append(f.CachedObjectsMax, mx), append(f.CachedObjectsMedian, md)
		mx, md = maxMedian(round, func(p VariantProcess) float64 { return p.HookCalls })
		f.HookCallsMax, f.HookCallsMedian = append(f.HookCallsMax, mx), append(f.HookCallsMedian, md)
		if round[0].WatchEvents != nil {
			mx, _ = maxMedian(round, func(p VariantProcess) float64 {
				if p.WatchEvents == nil {
					return 0
				}
				return *p.WatchEvents
			})
			f.WatchEventsMax = append(f.WatchEventsMax, mx)
		}
	}
	toF := func(xs []int64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = float64(x)
		}
		return out
	}
	f.PeakRSSMaxBytes = int64(median(toF(f.PeakRSSMax)))
	f.CPUMaxSeconds = round3(median(f.CPUMax))
	f.CachedObjectsMaxN = median(f.CachedObjectsMax)
	f.HookCallsMaxN = median(f.HookCallsMax)
	f.Kills = vs.kills
	return f
}

// summarizeReplicas fills each sharded variant's per-replica figures and
// their ratios to the one-replica run of the same rounds.
func (b *bench) summarizeReplicas() {
	byName := map[string]*VariantResult{}
	states := map[string]*variantState{}
	for _, vr := range b.result.Variants {
		byName[vr.Name] = vr
	}
	for _, vs := range b.variants {
		states[vs.Name] = vs
	}
	ref := byName["r1"]
	if ref == nil {
		ref = byName[defaultVariant]
	}
	var refFigures *ReplicaFigures
	if ref != nil && states[ref.Name] != nil {
		refFigures = replicaFiguresOf(states[ref.Name], 1)
	}
	for _, vr := range b.result.Variants {
		if vr.Replicas == 0 {
			continue
		}
		f := replicaFiguresOf(states[vr.Name], vr.Replicas)
		vr.PerReplica = f
		f.DoubleSyncs, f.DoubleSyncDetail = doubleSyncsOf(vr)
		if ref != nil && ref != vr && refFigures != nil {
			f.RatioTo = ref.Name
			ratio := func(x, y float64) float64 {
				if y <= 0 {
					return 0
				}
				return round3(x / y)
			}
			f.PeakRSSRatio = ratio(float64(f.PeakRSSMaxBytes), float64(refFigures.PeakRSSMaxBytes))
			f.CPURatio = ratio(f.CPUMaxSeconds, refFigures.CPUMaxSeconds)
			f.CachedObjectsRatio = ratio(f.CachedObjectsMaxN, refFigures.CachedObjectsMaxN)
			f.ConvergenceRatio = map[string]float64{}
			for _, phase := range []string{"create", "update"} {
				if s, rs := vr.Summary[phase], ref.Summary[phase]; s != nil && rs != nil {
					f.ConvergenceRatio[phase] = ratio(median(s.MetactlSeconds), median(rs.MetactlSeconds))
				}
			}
		}
	}
}

// doubleSyncsOf adds up the double syncs over vr's median and other runs:
// every run of every phase (and of the kills) counts.
func doubleSyncsOf(vr *VariantResult) (*int, string) {
	total, unknown := 0, 0
	var parts []string
	add := func(what string, c *HookCallers) {
		if c == nil {
			unknown++
			parts = append(parts, what+": no record")
			return
		}
		if !c.Known {
			unknown++
			parts = append(parts, fmt.Sprintf("%s: unknown (%s)", what, c.Problem))
			return
		}
		total += c.DoubleSyncs
		parts = append(parts, fmt.Sprintf("%s: %d overlapping, %d interleaved, %d parents called by 2+ replicas", what, c.Overlapping, c.Interleaved, c.ParentsByManyReplicas))
		if c.ByReplicaAgree != nil && !*c.ByReplicaAgree {
			parts = append(parts, c.Problem)
		}
		if c.Example != "" {
			parts = append(parts, "e.g. "+c.Example)
		}
	}
	for _, phase := range []string{"create", "update"} {
		for i, run := range vr.Runs[phase] {
			add(fmt.Sprintf("%s run %d", phase, i+1), run.HookCallers)
		}
	}
	if vr.PerReplica != nil {
		for _, k := range vr.PerReplica.Kills {
			add(fmt.Sprintf("kill round %d", k.Round), k.Callers)
		}
	}
	if unknown > 0 {
		return nil, strings.Join(parts, "; ")
	}
	return &total, strings.Join(parts, "; ")
}

// deleteLeases deletes the Leases of a sharded run (named after its lease
// name), once its replicas are stopped: a killed replica leaves its own.
func (b *bench) deleteLeases(ctx context.Context, vs *variantState, round int) {
	prefix := leaseName(vs, round)
	leases := b.kube.CoordinationV1().Leases(leaseNamespace)
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		logf("listing the Leases of %s: %v", prefix, err)
		return
	}
	for _, l := range list.Items {
		if l.Name == prefix || strings.HasPrefix(l.Name, prefix+"-") {
			if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				logf("deleting Lease %s: %v", l.Name, err)
			}
		}
	}
}
