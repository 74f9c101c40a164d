package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/controlplane"
	"github.com/metactl/metactl/internal/otlptest"
)

//go:embed crd.yaml
var crdYAML []byte

var (
	parentGVR = schema.GroupVersionResource{Group: "bench.metactl.io", Version: "v1", Resource: "benchparents"}
	parentGVK = schema.GroupVersionKind{Group: "bench.metactl.io", Version: "v1", Kind: "BenchParent"}
	ccGVR     = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	cmGVR     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

const (
	nsWarmup  = "bench-warmup"
	nsLimit   = "bench-limit"
	nsMetactl = "bench-metactl"
	nsCache   = "bench-cache"
	ccName    = "bench"
	// childrenPerParent is the number of ConfigMaps the hook asks for.
	childrenPerParent = 3
)

// options are the command-line flags.
type options struct {
	n              int
	slowHookMs     int
	workers        int
	out            string
	svg            string
	growthFrom     string
	phases         map[string]bool
	phaseList      string
	cachedChildren int
	warmup         int
	runs           int
	limitWriters   []int
	countsOnly     bool
	quietWait      time.Duration
	timeout        time.Duration
	metactlBin     string
	label          string
	profile        bool
	// apiserverProfile: collect kube-apiserver's CPU profiles in round 1's
	// create phases, the limit's and metactl's (apiprofile.go).
	apiserverProfile bool
	plotFrom         string
	// variants are the -variant flags, in order; empty: metactl with
	// default flags only, one process throughout (variant.go).
	variants []variant
	// Multi-replica mode (replicas.go). replicaCounts are the numbers of
	// sharded replicas measured, each as a variant "r<K>" beside the
	// default (from -replica-counts, or -replicas when > 1); empty: one
	// metactl as ever.
	replicaCounts []int
	// shardBuckets is the replicas' --shard-buckets.
	shardBuckets int
	// namespaces spreads the parents over this many namespaces with
	// generated names; 0: all in bench-metactl as ever.
	namespaces int
	// shardedListAndWatch starts kube-apiserver with the feature gate
	// ShardedListAndWatch (KEP-5866).
	shardedListAndWatch bool
	// killOne: after each sharded run's update, SIGKILL one replica and
	// update every parent again.
	killOne bool
	// leaseDuration is the replicas' --leader-elect-lease-duration.
	leaseDuration time.Duration
}

var allPhases = []string{"limit", "create", "update", "delete", "cache"}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.n, "n", 1000, "number of parents")
	flag.IntVar(&o.slowHookMs, "slow-hook-ms", 0, "milliseconds the hook sleeps per call (0: answer at once)")
	flag.IntVar(&o.workers, "workers", 16, "goroutines of the benchmark's own writes (parents in metactl's phases, warm-up, cache)")
	writers := flag.String("limit-writers", "16,64,256", "writer goroutines of the limit client, comma-separated: each round runs the limit with each, and the fastest counts")
	flag.StringVar(&o.out, "out", "", "results JSON file (default test/bench/results/<label>.json)")
	flag.StringVar(&o.svg, "svg", "", "also write an SVG plot of parents converged over time here")
	flag.StringVar(&o.phaseList, "phases", strings.Join(allPhases, ","), "phases to run, from "+strings.Join(allPhases, ",")+" (update and delete imply create)")
	flag.IntVar(&o.cachedChildren, "cached-children", 10000, "orphan ConfigMaps created for the cache phase")
	flag.IntVar(&o.warmup, "warmup", 100, "parents created and deleted by the limit client before any measurement")
	flag.IntVar(&o.runs, "runs", 3, "rounds, each a limit run (the writer sweep) then a metactl run of create and update; medians over the rounds count")
	flag.BoolVar(&o.countsOnly, "counts-only", false, "check counts and convergence only: no speed, CPU or memory target (for CI)")
	flag.DurationVar(&o.quietWait, "quiet-wait", 30*time.Second, "before each timed phase, wait up to this long for other work on the machine to use less than a quarter of a CPU (0: do not wait)")
	flag.DurationVar(&o.timeout, "timeout", 0, "longest wait for one phase to converge (default 10m + 0.5s per parent)")
	flag.StringVar(&o.metactlBin, "metactl", "", "metactl binary to run (default: go build ./cmd/metactl into a temporary folder)")
	flag.StringVar(&o.label, "label", "", "name of this run in output files (default n<N>[-slow<ms>ms])")
	flag.StringVar(&o.plotFrom, "plot-from", "", "only draw -svg from this results JSON file of an earlier run")
	flag.StringVar(&o.growthFrom, "growth-from", "", "only draw -svg of metactl's CPU and peak RSS against N from these results JSON files of earlier runs (comma-separated, default hook)")
	flag.BoolVar(&o.apiserverProfile, "apiserver-profile", false, "collect CPU profiles of kube-apiserver over round 1's create phases, the limit's (each writer count) and metactl's, in windows of the same length, to compare what serving each costs the server")
	flag.BoolVar(&o.profile, "profile", true, "collect a CPU profile of metactl during the create phase when metactl run has --pprof-addr")
	flag.Func("variant", "NAME=SPEC: also measure metactl run with SPEC, side by side with default flags in the same rounds (repeatable; see doc.go). "+
		"SPEC is space-separated: --flags for metactl run, KEY=VALUE environment variables, +otlp for tracing exported to a receiver in the benchmark",
		func(s string) error {
			v, err := parseVariant(s)
			if err != nil {
				return err
			}
			o.variants = append(o.variants, v)
			return nil
		})
	replicas := flag.Int("replicas", 1, "sharded metactl replicas (1: one metactl with default flags, as without this flag; K>1: also K replicas with --leader-elect --shard-buckets, as -replica-counts K)")
	counts := flag.String("replica-counts", "", "comma-separated numbers of sharded replicas (e.g. 1,2,4), each measured as a variant r<K> beside the default in every round, in an order that rotates each round")
	flag.IntVar(&o.shardBuckets, "shard-buckets", 0, "the replicas' --shard-buckets (default 32 with -replicas or -replica-counts)")
	flag.IntVar(&o.namespaces, "namespaces", -1, "spread the parents over this many namespaces with generated names (default 100 with -replicas or -replica-counts, else all in "+nsMetactl+")")
	flag.BoolVar(&o.shardedListAndWatch, "sharded-list-and-watch", false, "start kube-apiserver with --feature-gates=ShardedListAndWatch=true, so that it filters the replicas' lists and watches")
	flag.BoolVar(&o.killOne, "kill-one", false, "after each run of 2 or more replicas: SIGKILL one, time until its parents are synced again, then update all")
	flag.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "the replicas' --leader-elect-lease-duration")
	flag.Parse()
	if err := o.setReplicas(*replicas, *counts); err != nil {
		return o, err
	}
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if o.n < 1 || o.workers < 1 || o.runs < 1 {
		return o, errors.New("-n, -workers and -runs must be at least 1")
	}
	for _, w := range strings.Split(*writers, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || v < 1 {
			return o, fmt.Errorf("-limit-writers: %q is not a positive number", w)
		}
		o.limitWriters = append(o.limitWriters, v)
	}
	o.phases = map[string]bool{}
	for _, p := range strings.Split(o.phaseList, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		known := false
		for _, a := range allPhases {
			known = known || a == p
		}
		if !known {
			return o, fmt.Errorf("unknown phase %q (want some of %s)", p, strings.Join(allPhases, ","))
		}
		o.phases[p] = true
	}
	if o.phases["update"] || o.phases["delete"] {
		o.phases["create"] = true
	}
	o.variants = append(o.variants, replicaVariants(o)...)
	if err := checkVariants(o.variants); err != nil {
		return o, err
	}
	if len(o.variants) > 0 && !o.phases["create"] {
		return o, errors.New("-variant needs the create phase")
	}
	if o.timeout <= 0 {
		o.timeout = 10*time.Minute + time.Duration(o.n)*500*time.Millisecond
	}
	if o.label == "" {
		o.label = fmt.Sprintf("n%d", o.n)
		if o.slowHookMs > 0 {
			o.label += fmt.Sprintf("-slow%dms", o.slowHookMs)
		}
	}
	return o, nil
}

func main() {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.growthFrom != "" {
		if o.svg == "" {
			fmt.Fprintln(os.Stderr, "bench: -growth-from needs -svg")
			os.Exit(2)
		}
		if err := plotGrowth(strings.Split(o.growthFrom, ","), o.svg); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.plotFrom != "" {
		if err := replot(o.plotFrom, o.svg); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	// hack/cleanup-testenv.sh, which `make test` runs, kills control-plane
	// processes whose parent is not a test binary, metactl or go; named
	// like a test binary, this process keeps its control plane while
	// tests run elsewhere on the machine.
	_ = os.WriteFile("/proc/self/comm", []byte("bench.test"), 0)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil && interrupted {
		fmt.Fprintln(os.Stderr, "bench: interrupted; everything it started is stopped")
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAILED:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// bench holds what the phases share.
type bench struct {
	o        options
	root     string
	cp       *controlplane.ControlPlane
	dyn      dynamic.Interface
	kube     kubernetes.Interface
	jsonKube kubernetes.Interface // for the API server's /metrics
	cpProcs  map[string]int       // control-plane process name -> pid
	hook     *hookServer
	metactl  *metactlProcess
	// replicas, while a sharded variant runs, are its processes
	// (replicas[0] is also metactl); nil otherwise (see procs).
	replicas []*metactlProcess
	// replicaIDs are the replicas' identities (their member Leases'
	// holders; "" unknown), in the order of replicas.
	replicaIDs []string
	// lastCalls are the hook calls of a sharded variant's last phase.
	lastCalls []hookCall
	tracker   *tracker
	result    *Result
	outDir    string
	// Every run of each phase: the limit's (the fastest of the sweep, one
	// per round) and metactl's; the result holds the median runs.
	limitAll   map[string][]*PhaseResult
	metactlAll map[string][]*PhaseResult
	// With -variant: every variant (the default first), the one whose
	// process runs now (nil without -variant), and the OTLP receiver of
	// the variants that trace.
	variants []*variantState
	cur      *variantState
	otlp     *otlptest.Receiver
}

func run(ctx context.Context, o options) (err error) {
	began := time.Now()
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	b := &bench{o: o, root: root, limitAll: map[string][]*PhaseResult{}, metactlAll: map[string][]*PhaseResult{}}
	b.result = newResult(o)
	b.result.Machine = machineInfo()
	b.result.Source = sourceInfo(root)

	if o.out == "" {
		o.out = filepath.Join(root, "test", "bench", "results", o.label+".json")
		b.o.out = o.out
	}
	b.outDir = filepath.Dir(o.out)
	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return err
	}
	// Whatever happens, write what was measured.
	defer func() {
		b.result.TotalSeconds = time.Since(began).Seconds()
		if err != nil {
			b.result.Error = err.Error()
		}
		if werr := b.writeOutputs(); werr != nil {
			err = errors.Join(err, werr)
		}
	}()

	tmp, err := os.MkdirTemp("", "metactl-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bin := o.metactlBin
	if bin == "" {
		bin = filepath.Join(tmp, "metactl")
		logf("building metactl from %s", root)
		if err := buildMetactl(ctx, root, bin); err != nil {
			return err
		}
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return fmt.Errorf("decoding crd.yaml: %w", err)
	}
	logf("starting the control plane (etcd, kube-apiserver, and kube-controller-manager for the delete phase)")
	// kube-controller-manager collects the children of deleted parents:
	// only the delete phase needs it. A $KUBEBUILDER_ASSETS without it
	// (a many-core machine carrying only etcd and kube-apiserver, see
	// hack/bench-device.sh) runs the other phases.
	cp, err := controlplane.Start(controlplane.Options{AssetsDir: os.Getenv("KUBEBUILDER_ASSETS"), GarbageCollector: o.phases["delete"],
		ExtraCRDs: []*apiextensionsv1.CustomResourceDefinition{crd}, APIServerFlags: apiServerFlags(o)})
	if err != nil {
		return err
	}
	b.cp = cp
	defer func() {
		logf("stopping the control plane")
		if serr := cp.Stop(); serr != nil {
			logf("stopping the control plane: %v", serr)
		}
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	b.cpProcs = controlPlaneProcesses()
	logf("control plane up: %v", b.cpProcs)

	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	cfg.UserAgent = "metactl-bench"
	if b.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if b.jsonKube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	pcfg := rest.CopyConfig(cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if b.kube, err = kubernetes.NewForConfig(pcfg); err != nil {
		return err
	}
	if b.result.Sharding != nil {
		if m, err := b.serverMetrics(ctx); err == nil {
			for _, x := range m {
				if x.name == "kubernetes_feature_enabled" && x.labels["name"] == shardedListAndWatchGate {
					on := x.value == 1
					b.result.Sharding.GateEnabled = &on
				}
			}
		}
	}
	for _, ns := range append([]string{nsWarmup, nsLimit, nsMetactl, nsCache}, parentNamespaces(o)...) {
		_, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}

	if o.warmup > 0 {
		logf("warm-up: %d parents through the limit client", min(o.warmup, o.n))
		if _, err := b.limitPhases(ctx, nsWarmup, min(o.warmup, o.n), o.workers, false, ""); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	if !o.phases["create"] && !o.phases["cache"] {
		for round := 1; round <= o.runs && o.phases["limit"]; round++ {
			if err := b.limitRound(ctx, round); err != nil {
				return err
			}
		}
		return b.finish()
	}

	// metactl, its hook, and the benchmark's informers. metactl runs
	// throughout; while the limit runs, its CompositeController is absent,
	// so it watches no parent and no ConfigMap and is idle.
	if b.hook, err = startHook(time.Duration(o.slowHookMs) * time.Millisecond); err != nil {
		return err
	}
	defer b.hook.stop()
	if b.tracker, err = startTracker(ctx, b.dyn, b.kube, o.n, o.namespaces); err != nil {
		return err
	}
	defer b.tracker.stop()

	if len(o.variants) > 0 {
		return b.runVariants(ctx, bin)
	}

	logf("starting metactl run (%s)", bin)
	b.metactl, err = startMetactl(ctx, bin, cp.KubeconfigPath, filepath.Join(b.outDir, o.label+"-metactl.log"), o.profile, nil, nil)
	if err != nil {
		return err
	}
	defer b.metactl.Stop()
	b.result.MetactlPID = b.metactl.PID
	b.result.MetactlArgs = b.metactl.Args
	if _, err := b.metactl.settle(ctx, b.cpProcs); err != nil {
		return err
	}
	st, _ := readProc(b.metactl.PID)
	b.result.MetactlIdle = st
	if s, err := b.metactl.scrape(ctx); err == nil {
		b.result.MetactlIdleGoRuntime = s.goRuntime()
	}

	// Rounds: the limit (every writer count of the sweep), then metactl's
	// create and update, so that the machine's noise falls on both alike.
	// Before each round after the first, the CompositeController is
	// removed (so that metactl does not recreate anything) and the parents
	// and children deleted directly; the last round's parents are deleted
	// by metactl's delete phase.
	installed := false
	for round := 1; round <= o.runs; round++ {
		if installed {
			if err := b.removeController(ctx); err != nil {
				return err
			}
			installed = false
		}
		if o.phases["limit"] {
			if err := b.limitRound(ctx, round); err != nil {
				return err
			}
		}
		if !o.phases["create"] {
			continue
		}
		if err := b.installController(ctx); err != nil {
			return err
		}
		installed = true
		if _, err := b.metactl.settle(ctx, b.cpProcs); err != nil {
			return err
		}
		if err := b.metactlPhase(ctx, "create", round); err != nil {
			return err
		}
		if o.phases["update"] {
			if err := b.metactlPhase(ctx, "update", round); err != nil {
				return err
			}
		}
	}
	if o.phases["delete"] {
		if err := b.metactlPhase(ctx, "delete", 1); err != nil {
			return err
		}
	}
	st, _ = readProc(b.metactl.PID)
	b.result.MetactlAfterPhases = st
	if o.phases["cache"] && o.cachedChildren > 0 {
		if !installed {
			if err := b.installController(ctx); err != nil {
				return err
			}
		}
		if err := b.cachePhase(ctx); err != nil {
			return err
		}
	}
	st, _ = readProc(b.metactl.PID)
	b.result.MetactlEnd = st
	return b.finish()
}

// finish evaluates the targets, prints the report and fails when a target
// failed.
func (b *bench) finish() error {
	b.evaluate()
	b.printReport()
	var failed []string
	for _, t := range b.result.Targets {
		if t.Status == "FAIL" {
			failed = append(failed, t.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d target(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// limitRound runs the limit once with each writer count of the sweep and
// records, for each phase, the fastest.
func (b *bench) limitRound(ctx context.Context, round int) error {
	best := map[string]*PhaseResult{}
	sweep := map[string]map[string]float64{}
	for _, w := range b.o.limitWriters {
		logf("limit round %d of %d: %d writers", round, b.o.runs, w)
		profile := ""
		if b.o.apiserverProfile && round == 1 {
			profile = fmt.Sprintf("limit-w%d-create", w)
		}
		res, err := b.limitPhases(ctx, nsLimit, b.o.n, w, true, profile)
		if err != nil {
			return fmt.Errorf("limit: %w", err)
		}
		for phase, r := range res {
			if sweep[phase] == nil {
				sweep[phase] = map[string]float64{}
			}
			sweep[phase][strconv.Itoa(w)] = r.Seconds
			r.Counts.Run = fmt.Sprintf("round %d, %d writers", round, w)
			b.result.LimitCounts[phase] = append(b.result.LimitCounts[phase], r.Counts)
			if cur := best[phase]; cur == nil || r.Seconds < cur.Seconds {
				best[phase] = r
			}
		}
	}
	for phase, r := range best {
		b.limitAll[phase] = append(b.limitAll[phase], r)
		b.result.LimitRuns[phase] = append(b.result.LimitRuns[phase], LimitRun{Seconds: r.Seconds, Writers: r.Writers, Sweep: sweep[phase]})
	}
	return nil
}

// buildMetactl builds ./cmd/metactl as `make build` does.
func buildMetactl(ctx context.Context, root, out string) error {
	var last []byte
	// Others edit the tree concurrently: a broken build is retried for a
	// few minutes before giving up.
	for attempt := 1; attempt <= 5; attempt++ {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/metactl")
		cmd.Dir = root
		msg, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = msg
		logf("go build ./cmd/metactl failed (attempt %d), retrying in 60s:\n%s", attempt, msg)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
		}
	}
	return fmt.Errorf("go build ./cmd/metactl:\n%s", last)
}
