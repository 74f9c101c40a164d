package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/metactl/metactl/internal/otlptest"
	"github.com/metactl/metactl/test/internal/metactlrun"
)

// variant is one way of running `metactl run`, measured side by side with
// the default flags in the same rounds (-variant NAME=SPEC).
type variant struct {
	Name string `json:"name"`
	// Spec is the -variant flag's SPEC as given.
	Spec string `json:"spec,omitempty"`
	// Args are appended to metactl run's arguments.
	Args []string `json:"args,omitempty"`
	// Env are KEY=VALUE variables added to metactl's environment.
	Env []string `json:"env,omitempty"`
	// OTLP turns tracing on: metactl exports its spans over OTLP/HTTP to
	// a receiver in the benchmark, which counts them.
	OTLP bool `json:"otlp,omitempty"`
	// Bin, when set, is the metactl binary this variant runs instead of
	// -metactl's: another build (a baseline commit) measured side by side
	// in the same rounds.
	Bin string `json:"bin,omitempty"`
	// Replicas, when > 0, runs this many metactl processes sharding the
	// parents (-replica-counts; replicas.go).
	Replicas int `json:"replicas,omitempty"`
}

const (
	// defaultVariant is metactl with default flags, always measured when
	// there are variants, and the only one the speed, CPU and memory
	// targets judge.
	defaultVariant = "default"
	// otlpToken in a SPEC turns tracing on.
	otlpToken = "+otlp"
	// binPrefix in a SPEC names the variant's binary.
	binPrefix = "bin="
)

var (
	variantNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
	envNameRE     = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

// parseVariant parses NAME=SPEC. SPEC is split at spaces (no quoting): a
// token starting with "-" is an argument of metactl run, as is a token
// without "=" (the value of the flag before it); UPPER_CASE=value is an
// environment variable; +otlp turns tracing on; bin=PATH runs the metactl
// binary at PATH.
func parseVariant(s string) (variant, error) {
	name, spec, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok {
		return variant{}, fmt.Errorf("%q: want NAME=SPEC, e.g. ssa=--apply-strategy=server-side", s)
	}
	if !variantNameRE.MatchString(name) {
		return variant{}, fmt.Errorf("%q: the name %q must be lower-case letters, digits and '-' (at most 32; it names files)", s, name)
	}
	if name == defaultVariant {
		return variant{}, fmt.Errorf("%q: %q is metactl with default flags, measured with every -variant", s, defaultVariant)
	}
	v := variant{Name: name, Spec: strings.TrimSpace(spec)}
	for _, tok := range strings.Fields(spec) {
		key, _, isEnv := strings.Cut(tok, "=")
		switch {
		case strings.HasPrefix(tok, binPrefix):
			if v.Bin != "" {
				return variant{}, fmt.Errorf("%q: %s twice", s, binPrefix)
			}
			if v.Bin = strings.TrimPrefix(tok, binPrefix); v.Bin == "" {
				return variant{}, fmt.Errorf("%q: %s needs the path of a metactl binary", s, binPrefix)
			}
		case tok == otlpToken:
			if v.OTLP {
				return variant{}, fmt.Errorf("%q: %s twice", s, otlpToken)
			}
			v.OTLP = true
		case strings.HasPrefix(tok, "-"):
			v.Args = append(v.Args, tok)
		case strings.HasPrefix(tok, "+"):
			return variant{}, fmt.Errorf("%q: unknown %q (the only + word is %s)", s, tok, otlpToken)
		case isEnv && envNameRE.MatchString(key):
			v.Env = append(v.Env, tok)
		default:
			v.Args = append(v.Args, tok)
		}
	}
	if v.OTLP {
		for _, kv := range v.Env {
			key, _, _ := strings.Cut(kv, "=")
			if key == "OTEL_EXPORTER_OTLP_ENDPOINT" || key == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" {
				return variant{}, fmt.Errorf("%q: %s sends the spans to the benchmark's receiver; %s would send them elsewhere", s, otlpToken, key)
			}
		}
	}
	return v, nil
}

// checkVariants refuses two variants of one name.
func checkVariants(vs []variant) error {
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.Name] {
			return fmt.Errorf("-variant %s given twice", v.Name)
		}
		seen[v.Name] = true
	}
	return nil
}

// variantEnv is the environment of a variant's metactl: base without any
// OTEL_ variable (so that tracing is on only where a variant turns it on,
// whatever the benchmark's own environment holds), then the variant's
// variables, then with +otlp the receiver's endpoint.
func variantEnv(base []string, v variant, endpoint string) []string {
	out := make([]string, 0, len(base)+len(v.Env)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	out = append(out, v.Env...)
	if v.OTLP {
		out = append(out, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint)
	}
	return out
}

// variantOrder is the order in which k variants (index 0 the default) run
// in round (1-based) of runs: each round rotates the order by one, so
// that over k rounds each variant runs once in each place (first after
// the limit, ..., last), and the last round ends with the default, whose
// process then runs the delete and cache phases as without variants.
func variantOrder(k, round, runs int) []int {
	start := ((round-runs+1)%k + k) % k
	out := make([]int, k)
	for i := range out {
		out[i] = (start + i) % k
	}
	return out
}

// variantState is what the runs of one variant measured.
type variantState struct {
	variant
	all        map[string][]*PhaseResult
	runs       map[string][]RunSummary
	procs      []VariantProcess
	cpuProfile string
	// kills are the -kill-one runs of a sharded variant.
	kills []KillResult
}

// VariantProcess is one variant's metactl process: one per round, or per
// replica and round for a sharded variant.
type VariantProcess struct {
	Round int `json:"round"`
	// Replica is the index of a sharded variant's replica, Identity its
	// Lease identity when its log names it.
	Replica  int    `json:"replica,omitempty"`
	Identity string `json:"identity,omitempty"`
	// Per replica of a sharded variant, over its create and update runs:
	// hook calls by its own metrics, cached objects once quiet after
	// update (metactl_informer_objects), and watch events received (nil:
	// not exported); Killed when -kill-one killed it after update.
	HookCalls     float64  `json:"hookCalls,omitempty"`
	CachedObjects float64  `json:"cachedObjects,omitempty"`
	WatchEvents   *float64 `json:"watchEvents,omitempty"`
	Killed        bool     `json:"killed,omitempty"`
	// Position is the variant's place in the round (1: first after the
	// limit).
	Position int    `json:"position"`
	PID      int    `json:"pid"`
	Log      string `json:"log"`
	// Idle is the process once started and quiet, before the
	// CompositeController is created; Phases after its create and update
	// runs (PeakRSSBytes: VmHWM over its whole life until then).
	Idle   ProcStats `json:"idle"`
	Phases ProcStats `json:"afterPhases"`
	// Profiled is set when a CPU and a heap profile were taken during its
	// create run (round 1 with -profile); its peak RSS then counts only
	// when every run was profiled.
	Profiled               bool    `json:"profiled,omitempty"`
	CreateUpdateCPUSeconds float64 `json:"createUpdateCpuSeconds"`
	// With +otlp: the spans the receiver got that began during the
	// create and update runs (from the first write to metactl quiet
	// again), the sync spans among them, and the syncs metactl counted
	// (metactl_syncs_total) in those runs: fewer sync spans than syncs
	// means the exporter dropped spans (OTEL_BSP_MAX_QUEUE_SIZE), or a
	// sampler (OTEL_TRACES_SAMPLER) left syncs out.
	Spans     int     `json:"spans,omitempty"`
	SyncSpans int     `json:"syncSpans,omitempty"`
	Syncs     float64 `json:"syncs,omitempty"`
	// SpansOutside are the other spans received from the process (its
	// controller's removal, ...), not counted above.
	SpansOutside int `json:"spansOutside,omitempty"`
}

// VariantResult is one variant's results over the rounds.
type VariantResult struct {
	variant
	// Runs and Summary are as in Result's MetactlRuns and Summary (ratio
	// of the medians to the limit's, seconds with their spread, ratios
	// round by round); Median is the median run of each phase.
	Runs    map[string][]RunSummary  `json:"runs"`
	Summary map[string]*PhaseSummary `json:"summary"`
	Median  map[string]*PhaseResult  `json:"median"`
	// Per parent in the median run of each phase: hook calls, metactl's
	// object writes by verb/target, and kube-apiserver's writes by
	// "VERB resource" less the benchmark's own (APPLY is a server-side
	// apply).
	HookCallsPerParent    map[string]float64            `json:"hookCallsPerParent"`
	ObjectWritesPerParent map[string]map[string]float64 `json:"objectWritesPerParent"`
	ServerWritesPerParent map[string]map[string]float64 `json:"serverWritesPerParent"`
	// CreateUpdateCPUSeconds is the median over the rounds of metactl's
	// CPU for create + update.
	CreateUpdateCPUSeconds float64   `json:"createUpdateCpuSeconds"`
	CreateUpdateCPU        []float64 `json:"createUpdateCpu"`
	// ProcessCPUSeconds is the median over the rounds of the whole
	// process's CPU, as a user pays for it: from its start to the end of
	// its update phase (start-up, cache sync, waiting for the
	// CompositeController, both waves and the quiet between them);
	// ProcessCPU has each process's.
	ProcessCPUSeconds float64   `json:"processCpuSeconds"`
	ProcessCPU        []float64 `json:"processCpu"`
	// PeakRSSBytes is the median of the processes' VmHWM after create and
	// update (leaving out profiled ones when others exist); PeakRSS has
	// each counted process's. IdleRSSBytes is the median RSS when idle.
	PeakRSSBytes int64            `json:"peakRssBytes"`
	PeakRSS      []int64          `json:"peakRss"`
	IdleRSSBytes int64            `json:"idleRssBytes"`
	Processes    []VariantProcess `json:"processes"`
	// Spans is the median over the rounds of the spans exported during
	// create and update (+otlp only).
	Spans      float64 `json:"spans,omitempty"`
	CPUProfile string  `json:"cpuProfile,omitempty"`
	// PerReplica, for a sharded variant: its per-replica figures, their
	// ratios to one replica's, the double-sync witness and the kills
	// (replicas.go). Its PeakRSS, CreateUpdateCPU and ProcessCPU above
	// are then per replica process.
	PerReplica *ReplicaFigures `json:"perReplica,omitempty"`
}

func newVariantState(v variant) *variantState {
	return &variantState{variant: v, all: map[string][]*PhaseResult{}, runs: map[string][]RunSummary{}}
}

// recordRun keeps one run of a metactl phase: without variants and for the
// default variant where the targets read it, and with variants also with
// the variant.
func (b *bench) recordRun(phase string, r *PhaseResult, s RunSummary) {
	if b.cur == nil || b.cur.Name == defaultVariant {
		b.result.MetactlRuns[phase] = append(b.result.MetactlRuns[phase], s)
		b.metactlAll[phase] = append(b.metactlAll[phase], r)
	}
	if b.cur != nil {
		b.cur.all[phase] = append(b.cur.all[phase], r)
		b.cur.runs[phase] = append(b.cur.runs[phase], s)
	}
}

// who names the metactl being measured, in the log.
func (b *bench) who() string {
	if b.cur == nil {
		return "metactl"
	}
	return "metactl[" + b.cur.Name + "]"
}

// profilePrefix starts the names of the profiles' files.
func (b *bench) profilePrefix() string {
	if b.cur == nil || b.cur.Name == defaultVariant {
		return b.o.label
	}
	return b.o.label + "-" + b.cur.Name
}

func (b *bench) setCPUProfile(path string) {
	if b.cur == nil || b.cur.Name == defaultVariant {
		b.result.CPUProfile = path
	}
	if b.cur != nil {
		b.cur.cpuProfile = path
	}
}

// runVariants runs the rounds with variants. Each round is the limit, then
// each variant in turn (in variantOrder), each in a metactl process of its
// own started for the round: only one metactl may run at a time (each
// would serve the same CompositeController), and a fresh process for
// every variant in every round, the default's included, treats them all
// alike (same start, same empty caches, same heap history; a long-lived
// default against fresh variants would not be). Each variant's run is
// create and update with its counts checked as without variants; then the
// CompositeController, parents and children are removed and the process
// stopped (which exports the spans it still holds). The last round ends
// with the default, whose process runs on for the delete and cache
// phases.
func (b *bench) runVariants(ctx context.Context, bin string) (err error) {
	b.variants = []*variantState{newVariantState(variant{Name: defaultVariant})}
	for _, v := range b.o.variants {
		b.variants = append(b.variants, newVariantState(v))
		if v.OTLP && b.otlp == nil {
			b.otlp = otlptest.Start()
			defer b.otlp.Close()
			logf("OTLP/HTTP receiver for the variants that trace: %s", b.otlp.URL)
		}
	}
	defer func() {
		for _, p := range b.procs() {
			p.Stop()
		}
	}()
	for round := 1; round <= b.o.runs; round++ {
		if b.o.phases["limit"] {
			if err := b.limitRound(ctx, round); err != nil {
				return err
			}
		}
		order := variantOrder(len(b.variants), round, b.o.runs)
		var names []string
		for _, i := range order {
			names = append(names, b.variants[i].Name)
		}
		b.result.VariantOrder = append(b.result.VariantOrder, names)
		for pos, i := range order {
			keep := round == b.o.runs && pos == len(order)-1
			if err := b.variantRun(ctx, bin, b.variants[i], round, pos+1, keep); err != nil {
				return fmt.Errorf("variant %s, round %d: %w", b.variants[i].Name, round, err)
			}
		}
	}
	// The default's process of the last round runs on, its
	// CompositeController and parents in place.
	b.cur = b.variants[0]
	if b.cur.Name != defaultVariant || b.metactl == nil {
		return errors.New("the last round did not end with the default variant")
	}
	if b.o.phases["delete"] {
		if err := b.metactlPhase(ctx, "delete", 1); err != nil {
			return err
		}
	}
	st, _ := readProc(b.metactl.PID)
	b.result.MetactlAfterPhases = st
	if b.o.phases["cache"] && b.o.cachedChildren > 0 {
		if err := b.cachePhase(ctx); err != nil {
			return err
		}
	}
	st, _ = readProc(b.metactl.PID)
	b.result.MetactlEnd = st
	return b.finish()
}

// variantRun starts vs's metactl (a sharded variant's replicas), runs
// create and update with it, and unless keep removes the
// CompositeController with the parents and children and stops the
// process. A sharded variant's replicas wait for their buckets to settle
// before the waves and, with -kill-one, lose one after them (kill.go).
func (b *bench) variantRun(ctx context.Context, bin string, vs *variantState, round, pos int, keep bool) error {
	b.cur = vs
	logPath := filepath.Join(b.outDir, fmt.Sprintf("%s-%s-r%d-metactl.log", b.o.label, vs.Name, round))
	endpoint := ""
	if b.otlp != nil {
		endpoint = b.otlp.URL
	}
	logf("round %d: metactl run, variant %s (%s)", round, vs.Name, strings.Join(append(slices.Clone(vs.Args), vs.Env...), " "))
	if vs.Bin != "" {
		bin = vs.Bin
	}
	var p *metactlProcess
	if vs.Replicas > 0 {
		procs, err := b.startReplicas(ctx, bin, vs, round)
		if err != nil {
			return err
		}
		b.replicas, p = procs, procs[0]
	} else {
		var err error
		if p, err = startMetactl(ctx, bin, b.cp.KubeconfigPath, logPath, b.o.profile, vs.Args, variantEnv(os.Environ(), vs.variant, endpoint)); err != nil {
			return err
		}
	}
	b.metactl = p
	if _, err := b.settleAll(ctx); err != nil {
		return err
	}
	procs := make([]VariantProcess, len(b.procs()))
	for i, q := range b.procs() {
		procs[i] = VariantProcess{Round: round, Position: pos, PID: q.PID, Log: q.Log.Name(), Replica: i}
		procs[i].Idle, _ = readProc(q.PID)
	}
	if keep {
		// The process whose delete and cache phases follow: all of the
		// result's metactl process figures are this one's.
		b.result.MetactlPID, b.result.MetactlArgs, b.result.MetactlIdle = p.PID, p.Args, procs[0].Idle
		if s, err := p.scrape(ctx); err == nil {
			b.result.MetactlIdleGoRuntime = s.goRuntime()
		}
	}
	if err := b.installController(ctx); err != nil {
		return err
	}
	if _, err := b.settleAll(ctx); err != nil {
		return err
	}
	if b.sharded() {
		if err := b.waitOwned(ctx); err != nil {
			return err
		}
	}
	if b.otlp != nil {
		b.otlp.Take() // an earlier process's, received after it was counted
	}
	var runs []*PhaseResult
	for _, phase := range []string{"create", "update"} {
		if !b.o.phases[phase] {
			continue
		}
		if err := b.metactlPhase(ctx, phase, round); err != nil {
			return err
		}
		r := vs.all[phase][len(vs.all[phase])-1]
		runs = append(runs, r)
		for i := range procs {
			if i < len(r.Replicas) {
				x := r.Replicas[i]
				procs[i].CreateUpdateCPUSeconds = round3(procs[i].CreateUpdateCPUSeconds + x.CPUSeconds)
				procs[i].HookCalls += x.HookCalls
				procs[i].CachedObjects = x.CachedObjects
				procs[i].Identity = x.Identity
				if x.WatchEvents != nil {
					w := *x.WatchEvents
					if procs[i].WatchEvents != nil {
						w += *procs[i].WatchEvents
					}
					procs[i].WatchEvents = &w
				}
			} else if len(r.Replicas) == 0 {
				procs[i].CreateUpdateCPUSeconds = round3(procs[i].CreateUpdateCPUSeconds + r.MetactlCPUSeconds)
			}
		}
	}
	for i, q := range b.procs() {
		procs[i].Phases, _ = readProc(q.PID)
		procs[i].Profiled = round == 1 && q.PprofURL != ""
	}
	if vs.Replicas >= 2 && b.o.killOne {
		procs[len(procs)-1].Killed = true
		if err := b.killPhase(ctx, round); err != nil {
			return err
		}
	}
	if !keep {
		if err := b.removeController(ctx); err != nil {
			return err
		}
		for _, q := range b.procs() {
			q.Stop()
		}
		b.metactl, b.replicas, b.replicaIDs = nil, nil, nil
		if vs.Replicas > 0 {
			b.deleteLeases(ctx, vs, round)
		}
	}
	if vs.OTLP {
		// Stopped, the process has exported every span it held (only the
		// default, which does not trace, is kept).
		proc := &procs[0]
		proc.Spans, proc.SyncSpans, proc.SpansOutside = countSpans(b.otlp.Take(), runs)
		for _, r := range runs {
			proc.Syncs += total(r.Syncs)
		}
		logf("variant %s, round %d: %d spans exported during create and update (%d sync spans for %.0f syncs), %d more outside them",
			vs.Name, round, proc.Spans, proc.SyncSpans, proc.Syncs, proc.SpansOutside)
	}
	vs.procs = append(vs.procs, procs...)
	return nil
}

// countSpans counts the spans that began during runs (from each run's
// first write until metactl was quiet again), the sync spans among them,
// and the others.
func countSpans(spans []*tracepb.Span, runs []*PhaseResult) (in, syncs, outside int) {
	for _, s := range spans {
		at := time.Unix(0, int64(s.StartTimeUnixNano))
		during := false
		for _, r := range runs {
			during = during || (!at.Before(r.began) && !at.After(r.settled))
		}
		if !during {
			outside++
			continue
		}
		in++
		if strings.HasPrefix(s.Name, "sync ") {
			syncs++
		}
	}
	return in, syncs, outside
}

// summarizeVariants fills the results of every variant.
func (b *bench) summarizeVariants() {
	b.result.Variants = nil
	for _, vs := range b.variants {
		vr := &VariantResult{variant: vs.variant, Runs: vs.runs, Summary: map[string]*PhaseSummary{}, Median: map[string]*PhaseResult{},
			HookCallsPerParent: map[string]float64{}, ObjectWritesPerParent: map[string]map[string]float64{}, ServerWritesPerParent: map[string]map[string]float64{},
			Processes: vs.procs, CPUProfile: vs.cpuProfile}
		for _, phase := range []string{"create", "update", "delete"} {
			ms := vs.all[phase]
			if len(ms) == 0 {
				continue
			}
			sum := summaryOf(b.limitAll[phase], ms)
			m := medianRun(ms)
			m.RatioToLimit = sum.Ratio
			vr.Summary[phase], vr.Median[phase] = sum, m
			n := float64(m.Parents)
			vr.HookCallsPerParent[phase] = m.HookCallsPerParent
			vr.ObjectWritesPerParent[phase] = perParent(m.ObjectWrites, n)
			vr.ServerWritesPerParent[phase] = perParent(m.Counts.Server, n)
		}
		var peaks, peaksProfiled, idle []float64
		var spans []float64
		for _, p := range vs.procs {
			vr.CreateUpdateCPU = append(vr.CreateUpdateCPU, p.CreateUpdateCPUSeconds)
			vr.ProcessCPU = append(vr.ProcessCPU, round3(p.Phases.CPUSeconds))
			if p.Profiled {
				peaksProfiled = append(peaksProfiled, float64(p.Phases.PeakRSSBytes))
			} else {
				peaks = append(peaks, float64(p.Phases.PeakRSSBytes))
			}
			idle = append(idle, float64(p.Idle.RSSBytes))
			spans = append(spans, float64(p.Spans))
		}
		if len(peaks) == 0 {
			peaks = peaksProfiled
		}
		for _, p := range peaks {
			vr.PeakRSS = append(vr.PeakRSS, int64(p))
		}
		vr.CreateUpdateCPUSeconds = median(vr.CreateUpdateCPU)
		vr.ProcessCPUSeconds = median(vr.ProcessCPU)
		vr.PeakRSSBytes, vr.IdleRSSBytes = int64(median(peaks)), int64(median(idle))
		if vs.OTLP {
			vr.Spans = median(spans)
		}
		b.result.Variants = append(b.result.Variants, vr)
	}
}

func perParent(m map[string]float64, n float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = round3(v / n)
	}
	return out
}

// variantTargets are the checks of every variant but the default (whose
// runs the targets without variants judge): counts agree three ways,
// hook calls and writes at most the default's limits, and with +otlp
// spans exported by every run and, unless the SPEC sets a sampler, a sync
// span for every sync (syncSpansTarget); convergence, CPU and memory are
// reported, not judged.
func (b *bench) variantTargets() []Target {
	var ts []Target
	for _, vr := range b.result.Variants {
		if vr.Name == defaultVariant {
			continue
		}
		p := vr.Name + ": "
		for _, phase := range []string{"create", "update"} {
			runs := vr.Runs[phase]
			if len(runs) == 0 {
				continue
			}
			checks := make([]countCheck, 0, len(runs))
			for _, x := range runs {
				checks = append(checks, x.Counts)
			}
			ts = append(ts, countsTarget(p+phase+" counts agree", checks, true))
			limitTarget := func(name string, v, most float64, detail string) {
				t := Target{Name: fmt.Sprintf("%s%s %s per parent <= %g", p, phase, name, most), Status: "PASS", Value: round3(v), Max: most, Detail: detail}
				if v > most {
					t.Status = "FAIL"
				}
				ts = append(ts, t)
			}
			m := vr.Median[phase]
			limitTarget("hook calls", worst(runs, func(x RunSummary) float64 { return x.HookCallsPerParent }), maxHookCallsPerParent[phase], "")
			limitTarget("object writes", worst(runs, func(x RunSummary) float64 { return x.ObjectWritesPerParent }), minWrites[phase],
				formatCounts(m.ObjectWrites, float64(m.Parents)))
			_, detail := m.apiWritesPerParent(phase)
			limitTarget("API write requests", worst(runs, func(x RunSummary) float64 { return x.APIWritesPerParent }), minWrites[phase], detail)
			if sum := vr.Summary[phase]; sum.Ratio > 0 {
				ts = append(ts, Target{Name: p + phase + " convergence / limit (medians; reported, not judged)", Status: "INFO", Value: sum.Ratio, Unit: "x", Detail: sum.describe()})
			}
		}
		ts = append(ts,
			Target{Name: p + "metactl CPU for create+update (reported, not judged)", Status: "INFO", Value: vr.CreateUpdateCPUSeconds, Unit: "s",
				Detail: fmt.Sprintf("median of %d runs %v; default %v", len(vr.CreateUpdateCPU), vr.CreateUpdateCPU, b.result.Variants[0].CreateUpdateCPU)},
			Target{Name: p + "metactl peak RSS (reported, not judged)", Status: "INFO", Value: round3(float64(vr.PeakRSSBytes) / (1 << 20)), Unit: "MiB",
				Detail: fmt.Sprintf("median VmHWM after create and update of %d processes; default %s", len(vr.PeakRSS), mib(b.result.Variants[0].PeakRSSBytes))})
		if vr.OTLP {
			t := Target{Name: p + "spans exported in every run (tracing on)", Status: "PASS", Value: vr.Spans}
			var parts []string
			for _, x := range vr.Processes {
				parts = append(parts, fmt.Sprintf("round %d: %d spans, %d sync spans for %.0f syncs", x.Round, x.Spans, x.SyncSpans, x.Syncs))
				if x.Spans == 0 {
					t.Status = "FAIL"
				}
			}
			if len(vr.Processes) == 0 {
				t.Status = "FAIL"
			}
			t.Detail = strings.Join(parts, "; ")
			ts = append(ts, t)
			ts = append(ts, syncSpansTarget(p, vr))
		}
	}
	return ts
}

// syncSpansTarget checks that a variant that traces exported a sync span
// for every sync metactl counted in each of its processes' create and
// update runs: every sync is sampled unless the SPEC sets
// OTEL_TRACES_SAMPLER, so a missing span is one the exporter dropped (its
// queue full). With a sampler set, the figures are reported, not judged.
func syncSpansTarget(p string, vr *VariantResult) Target {
	// Value: the syncs without a sync span, over the processes.
	t := Target{Name: p + "a sync span for every sync (no span dropped)", Status: "PASS"}
	sampler := vr.sampler()
	if sampler != "" {
		t.Name = p + "sync spans for the syncs (" + sampler + ": reported, not judged)"
		t.Status = "INFO"
	}
	var parts []string
	for _, x := range vr.Processes {
		parts = append(parts, fmt.Sprintf("round %d: %d sync spans for %.0f syncs", x.Round, x.SyncSpans, x.Syncs))
		t.Value += x.Syncs - float64(x.SyncSpans)
		if sampler == "" && float64(x.SyncSpans) != x.Syncs {
			t.Status = "FAIL"
		}
	}
	if len(vr.Processes) == 0 && sampler == "" {
		t.Status = "FAIL"
	}
	t.Detail = strings.Join(parts, "; ")
	return t
}

// sampler is the OTEL_TRACES_SAMPLER variable the SPEC sets, "" if none.
func (v variant) sampler() string {
	for _, kv := range v.Env {
		if key, _, _ := strings.Cut(kv, "="); key == "OTEL_TRACES_SAMPLER" {
			return kv
		}
	}
	return ""
}

// printVariants prints the variants side by side.
func (b *bench) printVariants() {
	r := b.result
	if len(r.Variants) == 0 {
		return
	}
	fmt.Printf("Variants: each round the limit, then each variant in a fresh metactl process (orders %v).\n", r.VariantOrder)
	fmt.Println("ratio: median over the rounds / limit's median (round by round); per parent: median run; CPU: median create+update, and the whole process's from its start to the end of update; peak RSS: median VmHWM.")
	for _, vr := range r.Variants {
		spec := vr.Spec
		if vr.Name == defaultVariant {
			spec = "default flags"
		}
		fmt.Printf("  %s (%s):\n", vr.Name, spec)
		for _, phase := range []string{"create", "update"} {
			m := vr.Median[phase]
			if m == nil {
				continue
			}
			sum := vr.Summary[phase]
			n := float64(m.Parents)
			fmt.Printf("    %s: ratio %.2f (%s), %s; hook calls %.2f; writes %s; kube-apiserver %s\n",
				phase, sum.Ratio, joinFloats(sum.RoundRatios), spread(sum.MetactlSeconds), m.HookCallsPerParent,
				formatCounts(m.ObjectWrites, n), formatCounts(m.Counts.Server, n))
		}
		line := fmt.Sprintf("    CPU create+update %.2fs %v, whole process %.2fs %v; peak RSS %s; idle RSS %s", vr.CreateUpdateCPUSeconds, vr.CreateUpdateCPU,
			vr.ProcessCPUSeconds, vr.ProcessCPU, mib(vr.PeakRSSBytes), mib(vr.IdleRSSBytes))
		if vr.OTLP {
			line += fmt.Sprintf("; spans exported %.0f (median)", vr.Spans)
		}
		fmt.Println(line)
	}
	fmt.Println()
}

// startMetactl starts `metactl run` with extra arguments and, when env is
// not nil, that environment.
func startMetactl(ctx context.Context, bin, kubeconfig, logPath string, profile bool, args, env []string) (*metactlProcess, error) {
	p, err := metactlrun.Start(ctx, metactlrun.Options{Bin: bin, Kubeconfig: kubeconfig, LogPath: logPath, Pprof: profile, Logf: logf, ExtraArgs: args, Env: env})
	if err != nil {
		return nil, err
	}
	return &metactlProcess{p}, nil
}
