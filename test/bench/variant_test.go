package main

import (
	"flag"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func TestParseVariant(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want variant
	}{
		{"ssa=--apply-strategy=server-side", variant{Name: "ssa", Spec: "--apply-strategy=server-side", Args: []string{"--apply-strategy=server-side"}}},
		{"trace=+otlp", variant{Name: "trace", Spec: "+otlp", OTLP: true}},
		// A flag's value as the next word; environment variables; spaces.
		{"ssa-trace= --apply-strategy server-side  +otlp OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0.1 ", variant{
			Name: "ssa-trace", Spec: "--apply-strategy server-side  +otlp OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=0.1",
			Args: []string{"--apply-strategy", "server-side"}, Env: []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}, OTLP: true}},
		// Nothing: default flags again (an A/A comparison of the noise).
		{"again=", variant{Name: "again"}},
		{"gc=GOGC=50", variant{Name: "gc", Spec: "GOGC=50", Env: []string{"GOGC=50"}}},
		// Another build, with a flag.
		{"base=bin=/tmp/metactl-b9186f4 --client-qps=2000", variant{Name: "base", Spec: "bin=/tmp/metactl-b9186f4 --client-qps=2000",
			Bin: "/tmp/metactl-b9186f4", Args: []string{"--client-qps=2000"}}},
	} {
		got, err := parseVariant(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
	for in, why := range map[string]string{
		"ssa":           "NAME=SPEC",
		"=--x":          "must be lower-case",
		"SSA=--x":       "must be lower-case",
		"a/b=--x":       "must be lower-case",
		"default=--x":   "default flags",
		"t=+otlp +otlp": "twice",
		"t=+trace":      "unknown",
		"t=+otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://x": "receiver",
		"t=+otlp OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=x": "receiver",
		"b=bin=":          "needs the path",
		"b=bin=/a bin=/b": "twice",
	} {
		if _, err := parseVariant(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: error %v, want one saying %q", in, err, why)
		}
	}
	if err := checkVariants([]variant{{Name: "a"}, {Name: "b"}, {Name: "a"}}); err == nil {
		t.Error("two variants named a are accepted")
	}
	if err := checkVariants([]variant{{Name: "a"}, {Name: "b"}}); err != nil {
		t.Error(err)
	}
}

// The flag is repeatable and reaches the options in order.
func TestParseFlagsVariants(t *testing.T) {
	o := parseArgs(t, "-n", "10", "-variant", "ssa=--apply-strategy=server-side", "-variant", "trace=+otlp")
	var names []string
	for _, v := range o.variants {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"ssa", "trace"}) {
		t.Errorf("variants %v", names)
	}
	if o := parseArgs(t, "-n", "10"); len(o.variants) != 0 {
		t.Errorf("variants without -variant: %v", o.variants)
	}
}

func TestVariantEnv(t *testing.T) {
	base := []string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://elsewhere", "OTEL_SERVICE_NAME=x", "HOME=/h"}
	got := variantEnv(base, variant{Name: "d"}, "http://127.0.0.1:1")
	if want := []string{"PATH=/bin", "HOME=/h"}; !slices.Equal(got, want) {
		t.Errorf("without tracing: %v, want %v", got, want)
	}
	got = variantEnv(base, variant{Name: "t", OTLP: true, Env: []string{"OTEL_BSP_SCHEDULE_DELAY=100"}}, "http://127.0.0.1:1")
	if want := []string{"PATH=/bin", "HOME=/h", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"}; !slices.Equal(got, want) {
		t.Errorf("tracing: %v, want %v", got, want)
	}
}

func TestVariantOrder(t *testing.T) {
	for _, k := range []int{1, 2, 3, 4} {
		for _, runs := range []int{1, 2, 3, 5} {
			places := map[[2]int]int{} // (variant, place) -> rounds
			for round := 1; round <= runs; round++ {
				order := variantOrder(k, round, runs)
				sorted := slices.Sorted(slices.Values(order))
				for i := range k {
					if sorted[i] != i {
						t.Fatalf("k=%d runs=%d round %d: %v is not every variant once", k, runs, round, order)
					}
				}
				for place, v := range order {
					places[[2]int{v, place}]++
				}
				if round == runs && order[k-1] != 0 {
					t.Errorf("k=%d runs=%d: the last round %v does not end with the default", k, runs, order)
				}
			}
			// Over k rounds (or a multiple), each variant runs in each place
			// equally often.
			if runs%k == 0 {
				for v := range k {
					for place := range k {
						if places[[2]int{v, place}] != runs/k {
							t.Errorf("k=%d runs=%d: variant %d in place %d %d times", k, runs, v, place, places[[2]int{v, place}])
						}
					}
				}
			}
		}
	}
}

func TestCountSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	runs := []*PhaseResult{{began: t0, settled: t0.Add(10 * time.Second)}, {began: t0.Add(20 * time.Second), settled: t0.Add(30 * time.Second)}}
	span := func(name string, at time.Duration) *tracepb.Span {
		return &tracepb.Span{Name: name, StartTimeUnixNano: uint64(t0.Add(at).UnixNano())}
	}
	spans := []*tracepb.Span{
		span("sync compositecontroller/bench", 1*time.Second),
		span("hook sync", 2*time.Second),
		span("create child", 2*time.Second),
		span("sync compositecontroller/bench", 15*time.Second), // between the runs
		span("sync compositecontroller/bench", 25*time.Second),
		span("sync compositecontroller/bench", 40*time.Second), // after
	}
	in, syncs, outside := countSpans(spans, runs)
	if in != 4 || syncs != 2 || outside != 2 {
		t.Errorf("countSpans: %d in, %d sync spans, %d outside; want 4, 2, 2", in, syncs, outside)
	}
}

// A variant that traces fails when a run exported no span; one whose
// counts disagree fails; otherwise the variant's checks pass.
func TestVariantTargets(t *testing.T) {
	mk := func(spans int, seen int64) *bench {
		b := &bench{result: newResult(options{n: 200, runs: 1, countsOnly: true}), limitAll: map[string][]*PhaseResult{}, metactlAll: map[string][]*PhaseResult{}}
		def, tr := newVariantState(variant{Name: defaultVariant}), newVariantState(variant{Name: "trace", OTLP: true})
		b.variants = []*variantState{def, tr}
		for _, vs := range b.variants {
			b.cur = vs
			r := agreeingCreate(200)
			if vs == tr {
				r.HookCallsSeen = seen
			}
			r.Seconds = 1
			r.Counts = metactlCountCheck("round 1", "create", r)
			b.recordRun("create", r, RunSummary{Seconds: 1, Counts: r.Counts, HookCallsPerParent: 3, ObjectWritesPerParent: 4, APIWritesPerParent: 4})
			vs.procs = append(vs.procs, VariantProcess{Round: 1, Spans: spans, SyncSpans: 200, Syncs: 200})
		}
		b.cur = nil
		return b
	}
	status := func(b *bench) map[string]string {
		_ = b.finish()
		out := map[string]string{}
		for _, tg := range b.result.Targets {
			out[tg.Name] = tg.Status
		}
		return out
	}
	st := status(mk(500, 600))
	for _, name := range []string{"trace: create counts agree", "trace: create hook calls per parent <= 3", "trace: create object writes per parent <= 4",
		"trace: create API write requests per parent <= 4", "trace: spans exported in every run (tracing on)",
		"trace: a sync span for every sync (no span dropped)", "create counts agree"} {
		if st[name] != "PASS" {
			t.Errorf("%s: %q, want PASS (targets %v)", name, st[name], st)
		}
	}
	if st := status(mk(0, 600)); st["trace: spans exported in every run (tracing on)"] != "FAIL" {
		t.Errorf("no span exported: %v", st)
	}
	if st := status(mk(500, 599)); st["trace: create counts agree"] != "FAIL" || st["create counts agree"] != "PASS" {
		t.Errorf("trace's counts disagree: %v", st)
	}
	// Only the default's runs are the targets' runs.
	b := mk(500, 600)
	if len(b.result.MetactlRuns["create"]) != 1 || len(b.metactlAll["create"]) != 1 || len(b.variants[1].runs["create"]) != 1 {
		t.Errorf("runs recorded: default %d, all %d, trace %d", len(b.result.MetactlRuns["create"]), len(b.metactlAll["create"]), len(b.variants[1].runs["create"]))
	}
}

// Without a sampler in the SPEC every sync has its span: a process whose
// sync spans are fewer (or more) than its syncs fails; with
// OTEL_TRACES_SAMPLER set the figures are only reported.
func TestSyncSpansTarget(t *testing.T) {
	vr := func(env []string, procs ...VariantProcess) *VariantResult {
		return &VariantResult{variant: variant{Name: "trace", OTLP: true, Env: env}, Processes: procs}
	}
	all := VariantProcess{Round: 1, Spans: 2000, SyncSpans: 450, Syncs: 450}
	dropped := VariantProcess{Round: 2, Spans: 2000, SyncSpans: 449, Syncs: 450}
	extra := VariantProcess{Round: 2, Spans: 2000, SyncSpans: 451, Syncs: 450}
	for _, tc := range []struct {
		name   string
		vr     *VariantResult
		status string
	}{
		{"every sync has its span", vr(nil, all, all), "PASS"},
		{"a span dropped in round 2", vr(nil, all, dropped), "FAIL"},
		{"more sync spans than syncs", vr(nil, all, extra), "FAIL"},
		{"no process", vr(nil), "FAIL"},
		{"other variables, no sampler", vr([]string{"OTEL_BSP_MAX_QUEUE_SIZE=10"}, all, dropped), "FAIL"},
		{"a sampler", vr([]string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}, all, dropped), "INFO"},
	} {
		got := syncSpansTarget("trace: ", tc.vr)
		if got.Status != tc.status {
			t.Errorf("%s: %s (%s: %s), want %s", tc.name, got.Status, got.Name, got.Detail, tc.status)
		}
	}
	if got := syncSpansTarget("trace: ", vr(nil, all, dropped)); !strings.Contains(got.Detail, "round 2: 449 sync spans for 450 syncs") || got.Value != 1 {
		t.Errorf("value %g (want the 1 sync without a span), detail %q (want each round's figures)", got.Value, got.Detail)
	}
}

// parseArgs runs parseFlags on args, on a fresh flag set.
func parseArgs(t *testing.T, args ...string) options {
	t.Helper()
	oldArgs, oldFlags := os.Args, flag.CommandLine
	defer func() { os.Args, flag.CommandLine = oldArgs, oldFlags }()
	os.Args = append([]string{"bench"}, args...)
	flag.CommandLine = flag.NewFlagSet("bench", flag.ContinueOnError)
	o, err := parseFlags()
	if err != nil {
		t.Fatal(err)
	}
	return o
}
