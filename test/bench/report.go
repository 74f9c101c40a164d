package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is the JSON the benchmark writes.
type Result struct {
	Label          string   `json:"label"`
	N              int      `json:"n"`
	SlowHookMs     int      `json:"slowHookMs"`
	Workers        int      `json:"workers"`
	LimitWriters   []int    `json:"limitWriters"`
	Runs           int      `json:"runs"`
	CountsOnly     bool     `json:"countsOnly,omitempty"`
	Phases         []string `json:"phases"`
	CachedChildren int      `json:"cachedChildren"`
	Machine        Machine  `json:"machine"`
	Source         Source   `json:"source"`
	MetactlPID     int      `json:"metactlPid,omitempty"`
	MetactlArgs    []string `json:"metactlArgs,omitempty"`

	// Limit and Metactl hold the create, update and delete phases: the
	// median run of each (for an even number of runs, the faster of the
	// two middle ones).
	Limit   map[string]*PhaseResult `json:"limit"`
	Metactl map[string]*PhaseResult `json:"metactl"`
	// LimitRuns are each round's limit of each phase: the fastest run of
	// the writer sweep.
	LimitRuns map[string][]LimitRun `json:"limitRuns"`
	// MetactlRuns summarise every run of each metactl phase.
	MetactlRuns map[string][]RunSummary `json:"metactlRuns"`
	// Summary holds the medians and spreads that decide the targets.
	Summary map[string]*PhaseSummary `json:"summary"`
	// LimitCounts check every limit run (each writer count of each round)
	// against kube-apiserver's count.
	LimitCounts map[string][]countCheck `json:"limitCounts,omitempty"`

	// metactl's process at moments of the run. MetactlPID, MetactlArgs
	// and these are all one process's: without -variant the only one,
	// with -variant the default variant's process of the last round,
	// which runs the delete and cache phases (the variants' processes are
	// in Variants[].Processes).
	MetactlIdle ProcStats `json:"metactlIdle"`
	// MetactlIdleGoRuntime are metactl's Go runtime gauges when idle.
	MetactlIdleGoRuntime map[string]float64 `json:"metactlIdleGoRuntime,omitempty"`
	MetactlAfterPhases   ProcStats          `json:"metactlAfterPhases"`
	MetactlEnd           ProcStats          `json:"metactlEnd"`
	// CreateUpdateCPUSeconds is metactl's CPU for the create and update
	// phases, each until metactl was quiet again.
	CreateUpdateCPUSeconds float64 `json:"createUpdateCpuSeconds"`

	Cache      *CacheResult `json:"cache,omitempty"`
	CPUProfile string       `json:"cpuProfile,omitempty"`
	// PeakRSSResetAfterProfile is set when metactl's peak RSS was reset
	// after the profiled create run, so that the peak covers the later runs
	// and not the profilers' own memory.
	PeakRSSResetAfterProfile bool     `json:"peakRssResetAfterProfile,omitempty"`
	Targets                  []Target `json:"targets"`

	// Variants, with -variant: each variant's results, the default's
	// first (its runs are also those above); VariantOrder is the order in
	// which they ran in each round.
	Variants     []*VariantResult `json:"variants,omitempty"`
	VariantOrder [][]string       `json:"variantOrder,omitempty"`
	// Sharding describes the multi-replica mode's setup (replicas.go):
	// the replica counts measured (as variants r<K>), the buckets, the
	// namespaces and how the parents fall into the buckets, the lease
	// duration, and whether kube-apiserver filtered lists and watches
	// (ShardedListAndWatch).
	Sharding *ShardingSetup `json:"sharding,omitempty"`

	TotalSeconds float64 `json:"totalSeconds"`
	Error        string  `json:"error,omitempty"`
}

// PhaseResult is one phase of the limit or of metactl.
type PhaseResult struct {
	Parents   int `json:"parents"`
	Converged int `json:"converged"`
	// Writers is the limit client's goroutines.
	Writers int `json:"writers,omitempty"`
	// Seconds runs from the first write to the last parent converged.
	Seconds      float64 `json:"seconds"`
	RatioToLimit float64 `json:"ratioToLimit,omitempty"`
	// WritesIssuedSeconds is when the benchmark's own writes were done.
	WritesIssuedSeconds float64 `json:"writesIssuedSeconds,omitempty"`
	// SettledSeconds is when metactl was quiet again.
	SettledSeconds float64 `json:"settledSeconds,omitempty"`
	// Latency of each parent from its write to its convergence.
	LatencyP50Ms float64 `json:"latencyP50Ms"`
	LatencyP99Ms float64 `json:"latencyP99Ms"`
	LatencyMaxMs float64 `json:"latencyMaxMs"`
	// Series is (seconds since the phase began, parents converged).
	Series [][2]float64 `json:"series"`
	// ServerWrites are the write requests kube-apiserver served during the
	// phase, by "VERB resource[/subresource]", from its
	// apiserver_request_total; ServerWritesNotBench leaves out the
	// benchmark's own writes (one per parent). In the delete phase they
	// include the garbage collector's deletes of the children.
	ServerWrites         map[string]float64 `json:"serverWrites,omitempty"`
	ServerWritesNotBench float64            `json:"serverWritesNotBench,omitempty"`
	// ServerWatchEvents are the watch events kube-apiserver sent to all
	// watchers during the phase, by resource.
	ServerWatchEvents             map[string]float64 `json:"serverWatchEvents,omitempty"`
	ServerWritesNotBenchPerParent float64            `json:"serverWritesNotBenchPerParent,omitempty"`
	// ProcessCPUSeconds is the CPU of the control plane's processes and of
	// the benchmark itself during the phase.
	ProcessCPUSeconds map[string]float64 `json:"processCpuSeconds"`
	// OtherCPUSeconds is the CPU the rest of the machine used during the
	// phase (all busy CPU time less that of the processes above and of
	// metactl): work of others on a shared machine, which slows the phase.
	OtherCPUSeconds float64 `json:"otherCpuSeconds"`
	// OthersAtStartCPUs is the CPUs other processes used just before the
	// phase began (see -quiet-wait).
	OthersAtStartCPUs float64 `json:"othersAtStartCpus"`

	// From metactl's metrics, deltas over the phase until metactl was
	// quiet again.
	HookCalls          float64 `json:"hookCalls,omitempty"`
	HookCallsSeen      int64   `json:"hookCallsSeenByHook,omitempty"`
	HookCallsPerParent float64 `json:"hookCallsPerParent,omitempty"`
	// HookConnections is the TCP connections metactl opened to the hook.
	HookConnections       int64              `json:"hookConnections"`
	HookCallsByCode       map[string]float64 `json:"hookCallsByHookCode,omitempty"`
	ObjectWrites          map[string]float64 `json:"objectWrites,omitempty"`
	ObjectWritesTotal     float64            `json:"objectWritesTotal,omitempty"`
	ObjectWritesPerParent float64            `json:"objectWritesPerParent,omitempty"`
	APIRequests           map[string]float64 `json:"apiRequests,omitempty"`
	APIWrites             float64            `json:"apiWrites,omitempty"`
	APIWritesPerParent    float64            `json:"apiWritesPerParent,omitempty"`
	// LeaseWrites are the write requests of APIWrites that sharded
	// replicas made to their Leases (see countCheck); APIWritesPerParent
	// leaves them out.
	LeaseWrites float64 `json:"leaseWrites,omitempty"`
	// APIMetricExported is false when metactl's /metrics lacks
	// metactl_api_requests_total altogether.
	APIMetricExported     bool               `json:"apiMetricExported"`
	Syncs                 map[string]float64 `json:"syncs,omitempty"`
	QueueAdds             float64            `json:"queueAdds,omitempty"`
	QueueRetries          float64            `json:"queueRetries,omitempty"`
	UncachedReads         map[string]float64 `json:"uncachedReads,omitempty"`
	MetactlCPUSeconds     float64            `json:"metactlCpuSeconds,omitempty"`
	MetactlCPUToConverged float64            `json:"metactlCpuSecondsToConverged,omitempty"`
	MetactlRSSBytes       int64              `json:"metactlRssBytes,omitempty"`
	MetactlPeakRSSBytes   int64              `json:"metactlPeakRssBytes,omitempty"`
	MetactlHeapInuseBytes int64              `json:"metactlHeapInuseBytes,omitempty"`
	// MetactlGoRuntime are Go runtime gauges of metactl once quiet.
	MetactlGoRuntime map[string]float64 `json:"metactlGoRuntime,omitempty"`
	// Counts compares the counts of independent witnesses.
	Counts countCheck `json:"counts"`
	// Replicas are each replica's share of the phase, and HookCallers the
	// hook server's record of who called for which parent (the
	// double-sync witness), for a sharded variant only (replicas.go).
	Replicas    []ReplicaPhase `json:"replicas,omitempty"`
	HookCallers *HookCallers   `json:"hookCallers,omitempty"`

	// began is the phase's first write; settled, when metactl was quiet
	// again.
	began, settled time.Time
}

// LimitRun is one round's limit of a phase.
type LimitRun struct {
	Seconds float64 `json:"seconds"`
	Writers int     `json:"writers"`
	// Sweep is the seconds of each writer count.
	Sweep map[string]float64 `json:"sweep"`
}

// PhaseSummary is a phase's medians over the rounds and their spread.
type PhaseSummary struct {
	LimitSeconds   []float64 `json:"limitSeconds,omitempty"`
	LimitMedian    float64   `json:"limitMedian,omitempty"`
	MetactlSeconds []float64 `json:"metactlSeconds,omitempty"`
	MetactlMedian  float64   `json:"metactlMedian,omitempty"`
	// Ratio is the median of metactl's runs over the median of the
	// limit's; RoundRatios are each round's metactl run over the same
	// round's limit.
	Ratio       float64   `json:"ratio,omitempty"`
	RoundRatios []float64 `json:"roundRatios,omitempty"`
}

// RunSummary is one run of a metactl phase.
type RunSummary struct {
	Seconds                       float64    `json:"seconds"`
	APIWritesPerParent            float64    `json:"apiWritesPerParent"`
	MetactlCPUSeconds             float64    `json:"metactlCpuSeconds"`
	HookCallsPerParent            float64    `json:"hookCallsPerParent"`
	ObjectWritesPerParent         float64    `json:"objectWritesPerParent"`
	ServerWritesNotBenchPerParent float64    `json:"serverWritesNotBenchPerParent"`
	OtherCPUSeconds               float64    `json:"otherCpuSeconds"`
	OthersAtStartCPUs             float64    `json:"othersAtStartCpus"`
	Counts                        countCheck `json:"counts"`
	// HookCallers is the run's double-sync witness (sharded variants).
	HookCallers *HookCallers `json:"hookCallers,omitempty"`
	// Per replica of a sharded variant, in replica order: CPU, peak RSS
	// (VmHWM until the phase's end), hook calls (its metrics) and cached
	// objects once quiet.
	ReplicaCPUSeconds    []float64 `json:"replicaCpuSeconds,omitempty"`
	ReplicaPeakRSSBytes  []int64   `json:"replicaPeakRssBytes,omitempty"`
	ReplicaHookCalls     []float64 `json:"replicaHookCalls,omitempty"`
	ReplicaCachedObjects []float64 `json:"replicaCachedObjects,omitempty"`
}

// CacheResult is metactl's memory with orphan ConfigMaps cached.
type CacheResult struct {
	Objects               int     `json:"objects"`
	CreateSeconds         float64 `json:"createSeconds"`
	RSSBeforeBytes        int64   `json:"rssBeforeBytes"`
	RSSAfterBytes         int64   `json:"rssAfterBytes"`
	PeakRSSAfterBytes     int64   `json:"peakRssAfterBytes"`
	BytesPerObjectRSS     float64 `json:"bytesPerObjectRss"`
	HeapInuseBeforeBytes  int64   `json:"heapInuseBeforeBytes"`
	HeapInuseAfterBytes   int64   `json:"heapInuseAfterBytes"`
	BytesPerObjectHeap    float64 `json:"bytesPerObjectHeap"`
	MetactlCPUSeconds     float64 `json:"metactlCpuSeconds"`
	MetactlAPIWritesDelta float64 `json:"metactlApiWrites"`
	// Go runtime gauges of metactl before and after, each just after a
	// forced garbage collection when metactl serves pprof.
	GoRuntimeBefore map[string]float64 `json:"goRuntimeBefore,omitempty"`
	GoRuntimeAfter  map[string]float64 `json:"goRuntimeAfter,omitempty"`
}

// Target is one PASS/FAIL line.
type Target struct {
	Name   string  `json:"name"`
	Status string  `json:"status"` // PASS, FAIL, SKIP or INFO
	Value  float64 `json:"value"`
	Max    float64 `json:"max,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	Detail string  `json:"detail,omitempty"`
}

func newResult(o options) *Result {
	r := &Result{Label: o.label, N: o.n, SlowHookMs: o.slowHookMs, Workers: o.workers, CachedChildren: o.cachedChildren,
		LimitWriters: o.limitWriters, Runs: o.runs, CountsOnly: o.countsOnly,
		Limit: map[string]*PhaseResult{}, Metactl: map[string]*PhaseResult{}, LimitRuns: map[string][]LimitRun{},
		MetactlRuns: map[string][]RunSummary{}, Summary: map[string]*PhaseSummary{}, LimitCounts: map[string][]countCheck{}}
	for _, p := range allPhases {
		if o.phases[p] {
			r.Phases = append(r.Phases, p)
		}
	}
	if len(o.replicaCounts) > 0 || o.namespaces > 0 || o.shardedListAndWatch {
		r.Sharding = &ShardingSetup{ReplicaCounts: o.replicaCounts, ShardBuckets: o.shardBuckets, Namespaces: o.namespaces,
			ShardedListAndWatch: o.shardedListAndWatch, LeaseDurationSeconds: o.leaseDuration.Seconds(), KillOne: o.killOne}
		if o.shardBuckets > 0 {
			sp := bucketSpread(o.n, o.namespaces, o.shardBuckets)
			r.Sharding.Spread = &sp
		}
	}
	return r
}

// others is the machine's busy CPU less ours.
func others(machine float64, ours map[string]float64, metactl float64) float64 {
	for _, v := range ours {
		machine -= v
	}
	return round3(max(0, machine-metactl))
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// maxSeriesPoints bounds the series kept in the JSON and plotted.
const maxSeriesPoints = 1000

// setLatencies fills the latencies and the convergence series from the
// moment each parent was written and the moment it converged.
func (r *PhaseResult) setLatencies(t0 time.Time, started, converged []time.Time) {
	var lat []float64
	var at []float64
	for i := range converged {
		if converged[i].IsZero() {
			continue
		}
		at = append(at, converged[i].Sub(t0).Seconds())
		if !started[i].IsZero() {
			lat = append(lat, float64(converged[i].Sub(started[i]))/float64(time.Millisecond))
		}
	}
	sort.Float64s(lat)
	sort.Float64s(at)
	r.LatencyP50Ms = round3(percentile(lat, 0.50))
	r.LatencyP99Ms = round3(percentile(lat, 0.99))
	if len(lat) > 0 {
		r.LatencyMaxMs = round3(lat[len(lat)-1])
	}
	step := max(1, len(at)/maxSeriesPoints)
	r.Series = [][2]float64{{0, 0}}
	for i := 0; i < len(at); i += step {
		r.Series = append(r.Series, [2]float64{round3(at[i]), float64(i + 1)})
	}
	if n := len(at); n > 0 && r.Series[len(r.Series)-1][1] != float64(n) {
		r.Series = append(r.Series, [2]float64{round3(at[n-1]), float64(n)})
	}
}

// percentile of sorted values, nearest rank.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Minimum object writes per parent by metactl in each phase: create, 3
// child creates and 1 status write; update, 3 child updates and 1 status
// write; delete, none (the garbage collector deletes the children).
var minWrites = map[string]float64{"create": 4, "update": 4, "delete": 0}

// benchWrite is the benchmark's own write per parent in each phase, as
// kube-apiserver counts it.
var benchWrite = map[string]string{"create": "POST benchparents", "update": "PATCH benchparents", "delete": "DELETE benchparents"}

// Most hook calls per parent in each phase: as many as metacontroller makes
// when it re-syncs on its own writes. On create the hook is called with no
// children, with the children and the status it asked for, and once more
// with the status that counts them (the fixed point); on update with the
// old children and with the updated ones; on delete never (the parent is
// gone, and the garbage collector deletes its children).
var maxHookCallsPerParent = map[string]float64{"create": 3, "update": 2, "delete": 0}

// The targets (issue 15). The convergence ratios hold at every N; CPU
// and peak RSS are targets at targetN with the default hook, and peak RSS
// at scaleN too. With a slow hook, CPU and RSS are reported, not judged:
// the target there is that the hook's latency is hidden by concurrency.
const (
	fastRatio       = 1.2
	slowRatio       = 1.3
	maxCPUSeconds   = 5
	maxPeakRSS      = 60 << 20
	targetN         = 1000
	scaleN          = 10000
	maxScalePeakRSS = 150 << 20
)

// summarize picks each phase's median runs and computes the medians,
// their spread and the ratios that decide the targets.
func (b *bench) summarize() {
	r := b.result
	for _, phase := range []string{"create", "update", "delete"} {
		ls, ms := b.limitAll[phase], b.metactlAll[phase]
		if len(ls) == 0 && len(ms) == 0 {
			continue
		}
		sum := summaryOf(ls, ms)
		if l := medianRun(ls); l != nil {
			r.Limit[phase] = l
		}
		if m := medianRun(ms); m != nil {
			r.Metactl[phase] = m
			m.RatioToLimit = sum.Ratio
		}
		r.Summary[phase] = sum
	}
	b.summarizeVariants()
	b.summarizeReplicas()
}

// summaryOf is the medians of the limit's runs ls and metactl's ms, their
// ratio and the ratios round by round.
func summaryOf(ls, ms []*PhaseResult) *PhaseSummary {
	sum := &PhaseSummary{}
	for _, x := range ls {
		sum.LimitSeconds = append(sum.LimitSeconds, x.Seconds)
	}
	for _, x := range ms {
		sum.MetactlSeconds = append(sum.MetactlSeconds, x.Seconds)
	}
	sum.LimitMedian, sum.MetactlMedian = median(sum.LimitSeconds), median(sum.MetactlSeconds)
	if len(ms) > 0 && sum.LimitMedian > 0 {
		sum.Ratio = round3(sum.MetactlMedian / sum.LimitMedian)
	}
	// Round by round: the metactl run that followed each limit run.
	for i := range min(len(ls), len(ms)) {
		if ls[i].Seconds > 0 {
			sum.RoundRatios = append(sum.RoundRatios, round3(ms[i].Seconds/ls[i].Seconds))
		}
	}
	return sum
}

// median of xs (the mean of the two middle values for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

// medianRun is the run with the median seconds (for an even count, the
// faster of the two middle ones).
func medianRun(runs []*PhaseResult) *PhaseResult {
	if len(runs) == 0 {
		return nil
	}
	s := append([]*PhaseResult(nil), runs...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Seconds < s[j].Seconds })
	return s[(len(s)-1)/2]
}

// spread formats values as "median (min–max, ±x%)".
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	m := median(xs)
	if len(xs) == 1 || m == 0 {
		return fmt.Sprintf("%.2fs", m)
	}
	return fmt.Sprintf("%.2fs (%.2f–%.2f, ±%.0f%%)", m, lo, hi, 100*(hi-lo)/2/m)
}

// describe says how the phase's ratio came about.
func (s *PhaseSummary) describe() string {
	return fmt.Sprintf("metactl %s over limit %s; round by round %s", spread(s.MetactlSeconds), spread(s.LimitSeconds), joinFloats(s.RoundRatios))
}

func joinFloats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// evaluate turns the results into PASS/FAIL lines.
func (b *bench) evaluate() {
	b.summarize()
	r := b.result
	var ts []Target
	add := func(name string, value, limit float64, unit string, ok bool, measured bool, detail string) {
		t := Target{Name: name, Value: round3(value), Max: limit, Unit: unit, Detail: detail}
		switch {
		case !measured:
			t.Status = "SKIP"
		case ok:
			t.Status = "PASS"
		default:
			t.Status = "FAIL"
		}
		ts = append(ts, t)
	}
	speed := func(name string, value, limit float64, unit string, ok, measured bool, detail string) {
		if r.CountsOnly {
			ts = append(ts, Target{Name: name, Status: "SKIP", Value: round3(value), Max: limit, Unit: unit, Detail: "-counts-only: no speed target"})
			return
		}
		add(name, value, limit, unit, ok, measured, detail)
	}
	for _, phase := range []string{"create", "update", "delete"} {
		if phase == "delete" && len(r.MetactlRuns[phase]) == 0 {
			continue
		}
		checks := make([]countCheck, 0, len(r.MetactlRuns[phase]))
		for _, x := range r.MetactlRuns[phase] {
			checks = append(checks, x.Counts)
		}
		ts = append(ts, countsTarget(phase+" counts agree", checks, true))
	}
	for _, phase := range []string{"create", "update", "delete"} {
		if checks := r.LimitCounts[phase]; len(checks) > 0 {
			ts = append(ts, countsTarget("limit "+phase+" counts agree", checks, false))
		}
	}
	for _, phase := range []string{"create", "update"} {
		sum := r.Summary[phase]
		measured := sum != nil && sum.Ratio > 0
		ratio := 0.0
		detail := ""
		if measured {
			ratio = sum.Ratio
			detail = sum.describe()
		}
		if r.SlowHookMs == 0 {
			speed(fmt.Sprintf("%s convergence <= %.1fx limit (medians)", phase, fastRatio), ratio, fastRatio, "x", ratio <= fastRatio, measured, detail)
		} else {
			speed(fmt.Sprintf("%s convergence with %dms hook <= %.1fx limit (medians)", phase, r.SlowHookMs, slowRatio), ratio, slowRatio, "x", ratio <= slowRatio, measured, detail)
		}
	}
	for _, phase := range []string{"create", "update", "delete"} {
		m := r.Metactl[phase]
		v := worst(r.MetactlRuns[phase], func(x RunSummary) float64 { return x.HookCallsPerParent })
		add(fmt.Sprintf("%s hook calls per parent <= %g", phase, maxHookCallsPerParent[phase]), v, maxHookCallsPerParent[phase], "", v <= maxHookCallsPerParent[phase], m != nil, "")
	}
	for _, phase := range []string{"create", "update", "delete"} {
		m := r.Metactl[phase]
		if m == nil {
			add(fmt.Sprintf("%s object writes per parent <= %g", phase, minWrites[phase]), 0, minWrites[phase], "", false, false, "")
			continue
		}
		ow := worst(r.MetactlRuns[phase], func(x RunSummary) float64 { return x.ObjectWritesPerParent })
		add(fmt.Sprintf("%s object writes per parent <= %g", phase, minWrites[phase]), ow, minWrites[phase], "",
			ow <= minWrites[phase], true, formatCounts(m.ObjectWrites, float64(m.Parents)))
		apiWrites := worst(r.MetactlRuns[phase], func(x RunSummary) float64 { return x.APIWritesPerParent })
		_, detail := m.apiWritesPerParent(phase)
		add(fmt.Sprintf("%s API write requests per parent <= %g", phase, minWrites[phase]), apiWrites, minWrites[phase], "",
			apiWrites <= minWrites[phase], true, detail)
	}
	c, u := r.Metactl["create"], r.Metactl["update"]
	cpuDetail := ""
	if c != nil && u != nil {
		// The median over runs of create + update.
		var sums []float64
		for i := range min(len(r.MetactlRuns["create"]), len(r.MetactlRuns["update"])) {
			sums = append(sums, round3(r.MetactlRuns["create"][i].MetactlCPUSeconds+r.MetactlRuns["update"][i].MetactlCPUSeconds))
		}
		sort.Float64s(sums)
		if len(sums) > 0 {
			r.CreateUpdateCPUSeconds = round3(sums[len(sums)/2])
		}
		cpuDetail = fmt.Sprintf("median of %d runs %v; median runs: create %.2fs, update %.2fs", len(sums), sums, c.cpu(), u.cpu())
	}
	peak := r.MetactlAfterPhases.PeakRSSBytes
	switch {
	case r.SlowHookMs > 0:
		ts = append(ts,
			Target{Name: "metactl CPU for create+update (slow hook: reported, not judged)", Status: "INFO", Value: r.CreateUpdateCPUSeconds, Unit: "s", Detail: cpuDetail},
			Target{Name: "metactl peak RSS (slow hook: reported, not judged)", Status: "INFO", Value: round3(float64(peak) / (1 << 20)), Unit: "MiB", Detail: peakRSSDetail(r)})
	case r.N == scaleN:
		ts = append(ts, Target{Name: "metactl CPU for create+update", Status: "INFO", Value: r.CreateUpdateCPUSeconds, Unit: "s", Detail: cpuDetail})
		speed(fmt.Sprintf("metactl peak RSS <= %d MiB at N=%d", maxScalePeakRSS>>20, scaleN), float64(peak)/(1<<20), maxScalePeakRSS>>20, "MiB",
			peak <= maxScalePeakRSS, peak > 0, peakRSSDetail(r))
	default:
		atN := r.N == targetN
		speed(fmt.Sprintf("metactl CPU for create+update <= %d s at N=%d", maxCPUSeconds, targetN), r.CreateUpdateCPUSeconds, maxCPUSeconds, "s",
			r.CreateUpdateCPUSeconds <= maxCPUSeconds, atN && c != nil && u != nil, cpuDetail)
		speed(fmt.Sprintf("metactl peak RSS <= %d MiB at N=%d", maxPeakRSS>>20, targetN), float64(peak)/(1<<20), maxPeakRSS>>20, "MiB",
			peak <= maxPeakRSS, atN && peak > 0, peakRSSDetail(r))
	}
	ts = append(ts, b.variantTargets()...)
	ts = append(ts, b.replicaTargets()...)
	if r.Cache != nil {
		ts = append(ts, Target{Name: "bytes per cached object (RSS; heap in use)", Status: "INFO", Value: r.Cache.BytesPerObjectRSS, Unit: "B",
			Detail: fmt.Sprintf("RSS %s -> %s, heap in use %.0f B/object, with %d ConfigMaps", mib(r.Cache.RSSBeforeBytes), mib(r.Cache.RSSAfterBytes), r.Cache.BytesPerObjectHeap, r.Cache.Objects)})
	}
	r.Targets = ts
}

// worst is the largest of f over runs.
func worst(runs []RunSummary, f func(RunSummary) float64) float64 {
	w := 0.0
	for _, x := range runs {
		w = max(w, f(x))
	}
	return w
}

// apiWritesPerParent returns the API write requests metactl made per
// parent in the phase, and where they were counted: by metactl's
// metactl_api_requests_total, or, when metactl does not export it, by
// kube-apiserver (every write it served during the phase except the
// benchmark's own, its own lease renewals and, when deleting, the garbage
// collector's deletes of ConfigMaps).
func (p *PhaseResult) apiWritesPerParent(phase string) (float64, string) {
	n := float64(p.Parents)
	if p.APIMetricExported && p.LeaseWrites > 0 {
		return round3((p.APIWrites - p.LeaseWrites) / n), fmt.Sprintf("metactl_api_requests_total: %s, less %.0f Lease writes",
			formatCounts(onlyWrites(p.APIRequests), n), p.LeaseWrites)
	}
	if p.APIMetricExported {
		return round3(p.APIWrites / n), "metactl_api_requests_total: " + formatCounts(onlyWrites(p.APIRequests), n)
	}
	others := maps.Clone(p.ServerWrites)
	others[benchWrite[phase]] -= n
	delete(others, "PUT leases")
	if phase == "delete" {
		delete(others, "DELETE configmaps")
	}
	maps.DeleteFunc(others, func(_ string, v float64) bool { return v == 0 })
	total := 0.0
	for _, v := range others {
		total += v
	}
	return round3(total / n), "metactl_api_requests_total is not exported; kube-apiserver served, besides the benchmark's writes: " + formatCounts(others, n)
}

func (p *PhaseResult) cpu() float64 {
	if p == nil {
		return 0
	}
	return p.MetactlCPUSeconds
}

func onlyWrites(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		verb, _, _ := strings.Cut(k, "/")
		for _, w := range writeVerbs {
			if verb == w {
				out[k] += v
			}
		}
	}
	return out
}

// formatCounts prints counts per parent, e.g. "create/child 3.00".
func formatCounts(m map[string]float64, n float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]/n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (b *bench) printReport() {
	r := b.result
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(os.Stdout, "\nmetactl benchmark %s: N=%d, hook delay %dms, %d CPUs (%s), commit %s\n\n", r.Label, r.N, r.SlowHookMs, r.Machine.CPUs, r.Machine.CPUModel, r.Source.Commit)
	if len(r.Variants) > 0 {
		fmt.Fprintf(os.Stdout, "Medians of %d rounds (limit: the fastest of %v writers in each; then each variant); metactl here is the default variant, the others follow.\n\n", r.Runs, r.LimitWriters)
	} else {
		fmt.Fprintf(os.Stdout, "Medians of %d rounds (limit: the fastest of %v writers in each; then metactl).\n\n", r.Runs, r.LimitWriters)
	}
	fmt.Fprintln(w, "phase\tlimit s\tmetactl s\tratio\thook calls/parent\tobject writes/parent\tAPI writes/parent\tmetactl CPU s\tp50 ms\tp99 ms\t")
	for _, phase := range []string{"create", "update", "delete"} {
		l, m := r.Limit[phase], r.Metactl[phase]
		if l == nil && m == nil {
			continue
		}
		cells := []string{phase, "-", "-", "-", "-", "-", "-", "-", "-", "-"}
		if l != nil {
			cells[1] = fmt.Sprintf("%.2f", r.Summary[phase].LimitMedian)
		}
		if m != nil {
			cells[2] = fmt.Sprintf("%.2f", r.Summary[phase].MetactlMedian)
			if m.RatioToLimit > 0 {
				cells[3] = fmt.Sprintf("%.2f", m.RatioToLimit)
			}
			cells[4] = fmt.Sprintf("%.2f", m.HookCallsPerParent)
			cells[5] = fmt.Sprintf("%.2f", m.ObjectWritesPerParent)
			apiWrites, _ := m.apiWritesPerParent(phase)
			cells[6] = fmt.Sprintf("%.2f", apiWrites)
			cells[7] = fmt.Sprintf("%.2f", m.MetactlCPUSeconds)
			cells[8] = fmt.Sprintf("%.0f", m.LatencyP50Ms)
			cells[9] = fmt.Sprintf("%.0f", m.LatencyP99Ms)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
	}
	_ = w.Flush()
	fmt.Println()
	for _, phase := range []string{"create", "update", "delete"} {
		l, m := r.Limit[phase], r.Metactl[phase]
		if l == nil && m == nil {
			continue
		}
		fmt.Printf("%s:\n", phase)
		if lr := r.LimitRuns[phase]; len(lr) > 0 {
			var runs []string
			for _, x := range lr {
				var sw []string
				for _, w := range r.LimitWriters {
					if v, ok := x.Sweep[strconv.Itoa(w)]; ok {
						sw = append(sw, fmt.Sprintf("%d: %.2f", w, v))
					}
				}
				runs = append(runs, fmt.Sprintf("%.2f (%s)", x.Seconds, strings.Join(sw, ", ")))
			}
			fmt.Printf("  limit   %s; rounds, best of the writer sweep: %s\n", spread(r.Summary[phase].LimitSeconds), strings.Join(runs, "; "))
		}
		if m != nil {
			var runs []string
			for _, x := range r.MetactlRuns[phase] {
				runs = append(runs, fmt.Sprintf("%.2f (CPU %.2f; others %.2f CPUs before, %.2f CPU-s during)", x.Seconds, x.MetactlCPUSeconds, x.OthersAtStartCPUs, x.OtherCPUSeconds))
			}
			fmt.Printf("  metactl %s; runs: %s\n", spread(r.Summary[phase].MetactlSeconds), strings.Join(runs, "; "))
		}
		if sum := r.Summary[phase]; sum.Ratio > 0 {
			fmt.Printf("  ratio of the medians %.2f; round by round %s\n", sum.Ratio, joinFloats(sum.RoundRatios))
		}
		if m != nil {
			n := float64(m.Parents)
			fmt.Printf("  median metactl run, per parent: object writes %s\n", formatCounts(m.ObjectWrites, n))
			if m.APIMetricExported {
				fmt.Printf("    API requests %s\n", formatCounts(m.APIRequests, n))
			}
			fmt.Printf("    kube-apiserver writes %s\n", formatCounts(m.ServerWrites, n))
			fmt.Printf("    hook calls %s (%d connections); syncs %s; queue adds %.2f, retries %.2f\n",
				formatCounts(m.HookCallsByCode, n), m.HookConnections, formatCounts(m.Syncs, n), m.QueueAdds/n, m.QueueRetries/n)
			fmt.Printf("    CPU seconds %s, metactl %.2f (%.2f until converged), others on the machine %.2f\n", formatCounts(m.ProcessCPUSeconds, 1), m.MetactlCPUSeconds, m.MetactlCPUToConverged, m.OtherCPUSeconds)
		}
		if l != nil {
			fmt.Printf("  median limit run (%d writers), per parent: kube-apiserver writes %s\n", l.Writers, formatCounts(l.ServerWrites, float64(l.Parents)))
			fmt.Printf("    CPU seconds %s, others on the machine %.2f\n", formatCounts(l.ProcessCPUSeconds, 1), l.OtherCPUSeconds)
		}
	}
	if len(r.Variants) == 0 {
		fmt.Printf("metactl process CPU: %.2f s from its start to the end of its phases, over %d rounds (start-up, cache sync, the limit's runs while idle, the waves and the quiet between them)\n",
			r.MetactlAfterPhases.CPUSeconds, r.Runs)
	}
	fmt.Printf("metactl RSS: idle %s (anonymous %s, files %s), after phases %s, peak %s, end %s\n",
		mib(r.MetactlIdle.RSSBytes), mib(r.MetactlIdle.RSSAnonBytes), mib(r.MetactlIdle.RSSFileBytes),
		mib(r.MetactlAfterPhases.RSSBytes), mib(r.MetactlAfterPhases.PeakRSSBytes), mib(r.MetactlEnd.RSSBytes))
	if c := r.Cache; c != nil {
		fmt.Printf("cache: %d orphan ConfigMaps: RSS %s -> %s (%.0f B/object), heap in use %s -> %s (%.0f B/object)\n",
			c.Objects, mib(c.RSSBeforeBytes), mib(c.RSSAfterBytes), c.BytesPerObjectRSS, mib(c.HeapInuseBeforeBytes), mib(c.HeapInuseAfterBytes), c.BytesPerObjectHeap)
	}
	fmt.Println()
	b.printVariants()
	b.printReplicas()
	pass, fail := 0, 0
	for _, t := range r.Targets {
		switch t.Status {
		case "PASS":
			pass++
		case "FAIL":
			fail++
		}
		line := fmt.Sprintf("%-4s %s: %g%s", t.Status, t.Name, t.Value, t.Unit)
		if t.Detail != "" {
			line += " (" + t.Detail + ")"
		}
		fmt.Println(line)
	}
	fmt.Printf("\n%d PASS, %d FAIL\n", pass, fail)
}

func (b *bench) writeOutputs() error {
	data, err := json.MarshalIndent(b.result, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.o.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	logf("wrote %s", b.o.out)
	if b.o.svg != "" && len(b.result.Metactl) > 0 {
		if err := os.MkdirAll(filepath.Dir(b.o.svg), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(b.o.svg, []byte(plotSVG(b.result)), 0o644); err != nil {
			return err
		}
		logf("wrote %s", b.o.svg)
	}
	return nil
}

// replot draws the SVG of an earlier run's results.
func replot(jsonPath, svgPath string) error {
	if svgPath == "" {
		return fmt.Errorf("-plot-from needs -svg")
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	r := &Result{}
	if err := json.Unmarshal(data, r); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}
	return os.WriteFile(svgPath, []byte(plotSVG(r)), 0o644)
}

// peakRSSDetail says what the peak RSS covers.
func peakRSSDetail(r *Result) string {
	if len(r.Variants) > 0 {
		return "VmHWM of the default variant's process of the last round, after its create, update and delete phases"
	}
	if r.PeakRSSResetAfterProfile {
		return "VmHWM over the create, update and delete phases after the profiled create run"
	}
	return "VmHWM after the create, update and delete phases"
}
