package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/internal/tracing"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// runFlags are the flags of `metactl run`.
type runFlags struct {
	kube              kubeFlags
	workers           int
	clientQPS         float32
	clientBurst       int
	discoveryInterval time.Duration
	cacheResync       time.Duration
	metricsAddr       string
	healthAddr        string
	pprofAddr         string
	maxResponseBytes  int64
	responseBudget    int64
	decodedBudget     int64
	etagCacheMaxBytes int64
	maxRelated        int
	maxRetryDelay     time.Duration
	stopGracePeriod   time.Duration
	historyMaxBytes   int64
	eventsQPS         float32
	eventsBurst       int
	leaderElect       bool
	leaderElection    manager.LeaderElection
	// credentialNamespaces and allowInsecureCredentials: see
	// manager.Options.
	credentialNamespaces     []string
	allowInsecureCredentials bool
	// requireServiceAccount: see manager.Options.RequireServiceAccount.
	requireServiceAccount bool
	// syncedCondition: see manager.Options.SyncedCondition.
	syncedCondition bool
	// explain serves explain.Path on the metrics address.
	explain bool
	// recordDir, recordMaxCalls and recordMaxBytes: see
	// hookrecord.RecorderOptions; recordDir also records every
	// controller (manager.Options.RecordAll).
	recordDir      string
	recordMaxCalls int
	recordMaxBytes int64
	// record: false records nothing (manager.Options.Record nil).
	record bool
	// applyStrategy and applyForceConflicts: see
	// manager.Options.ApplyStrategy and RefuseApplyConflicts.
	applyStrategy       string
	applyForceConflicts bool
}

func newRunCommand() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run every CompositeController and DecoratorController in the cluster",
		Long: `run connects to the cluster as kubectl does (--kubeconfig, else
$KUBECONFIG, else ~/.kube/config, else the in-cluster config; --context
picks a context), watches
CompositeController and DecoratorController objects and runs one
controller for each. It stops on SIGINT or SIGTERM: the syncs in flight
are cancelled (their hook calls end, they write nothing more) and waited
for at most --stop-grace-period, as when a controller object is changed
or deleted. With --leader-elect, of several replicas only the one
holding the Lease runs controllers; a replica that loses the Lease exits
at once. A failing sync is retried with a backoff that doubles from 250ms
up to --max-retry-delay; "metactl resync" syncs an object now.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, f)
		},
	}
	fs := cmd.Flags()
	f.kube.add(fs, "")
	fs.IntVar(&f.workers, "workers", loop.DefaultWorkers, "most parents each controller syncs at once (a goroutine each, none while idle); hook calls of different parents run concurrently, so a slow hook needs more")
	fs.Float32Var(&f.clientQPS, "client-qps", 0, "a fixed limit of requests per second to the API server, all controllers together; 0: none, the API server's 429 answers set the pace (docs/performance.md)")
	fs.IntVar(&f.clientBurst, "client-burst", 0, "with --client-qps, requests allowed at once above it; 0: twice --client-qps")
	fs.DurationVar(&f.discoveryInterval, "discovery-interval", 30*time.Second, "how often to refresh the API server's resource list")
	fs.DurationVar(&f.cacheResync, "cache-resync", 30*time.Minute, "informer resync period: every parent and decorated object is synced again this often, as metacontroller's --cache-flush-interval does; 0 disables (objects are then synced only by events, resyncPeriodSeconds or resyncAfterSeconds)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", ":9999", "address serving Prometheus metrics at /metrics; empty disables")
	fs.BoolVar(&f.explain, "explain", true, "serve "+explain.Path+" on --metrics-addr, what `metactl explain` asks: for one object, its controller, last syncs, backoff and children (names and the errors metactl also puts in Events; no object contents); false turns it off, and the record of syncs with it")
	fs.StringVar(&f.healthAddr, "health-addr", ":9998", "address serving /healthz and /readyz; empty disables")
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "address serving Go's /debug/pprof/ profiles, mutex and block profiles included (sampled while it is set); empty (the default) disables")
	fs.Float32Var(&f.eventsQPS, "events-qps", 0, "Events per second per object once --events-burst is spent (client-go's spam filter); 0 keeps client-go's default of one per 5 minutes")
	fs.IntVar(&f.eventsBurst, "events-burst", 0, "Events per object allowed at once; 0 keeps client-go's default of 25")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "run controllers only while holding a Lease, for several replicas (the shipped Deployment sets it)")
	fs.StringVar(&f.leaderElection.Namespace, "leader-elect-namespace", inClusterNamespace(), "namespace of the leader Lease")
	fs.StringVar(&f.leaderElection.Name, "leader-elect-lease-name", "metactl", "name of the leader Lease")
	fs.DurationVar(&f.leaderElection.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the leader's last renewal before taking over")
	fs.DurationVar(&f.leaderElection.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops (must be shorter than the lease duration)")
	fs.DurationVar(&f.leaderElection.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "pace of acquire and renew attempts")
	fs.DurationVar(&f.maxRetryDelay, "max-retry-delay", loop.MaxRetryDelay, "longest wait before a failing sync is retried (the backoff doubles from 250ms up to this); a hook that recovers is called again within this long (metactl dev uses 5s)")
	fs.DurationVar(&f.stopGracePeriod, "stop-grace-period", loop.DefaultStopGracePeriod, "longest wait for a stopping controller's syncs in flight (on shutdown, a spec change, a deletion), once cancelled; syncs still running then are abandoned and logged")
	fs.Int64Var(&f.historyMaxBytes, "history-max-bytes", history.DefaultMaxBytes, "memory budget of the record of each object's last syncs (why each ran, its hook calls, writes and outcome; metactl explain, so none with --explain=false), all controllers together: past it the objects synced longest ago are dropped, those whose newest sync succeeded first; 0 disables the record")
	fs.Int64Var(&f.maxResponseBytes, "max-hook-response-bytes", hookclient.DefaultMaxResponseBytes, "largest hook response accepted")
	fs.Int64Var(&f.responseBudget, "hook-response-budget-bytes", hookclient.DefaultResponseBudgetBytes, "most bytes of hook responses held in memory at once, all controllers together, from reading a response until it is decoded; a call waits for room (up to its hook's timeout); responses over 64 KiB use at most seven eighths of it (the rest is kept for small ones), and a larger one than that is refused; responses over 64 KiB sent without a Content-Length are read side by side within seven eighths of it less --max-hook-response-bytes, one at a time when that leaves no room")
	fs.Int64Var(&f.decodedBudget, "hook-decoded-budget-bytes", hookclient.DefaultDecodedBudgetBytes, "most memory the objects decoded from hook responses may take at once, all controllers together, as estimated from each response's JSON before decoding it, from decoding until the sync that called the hook ends; a call waits for room (up to its hook's timeout), and a response whose estimate is larger is refused")
	fs.Int64Var(&f.etagCacheMaxBytes, "etag-cache-max-bytes", hookclient.DefaultEtagCacheMaxBytes, "most bytes of hook responses kept for hooks with etag enabled, all controllers together (the least recently used go first)")
	fs.IntVar(&f.maxRelated, "max-related-objects", related.DefaultMaxObjects, "most related objects the customize hook's rules may select for one parent; more fails the sync with an error naming the rule")
	fs.StringSliceVar(&f.credentialNamespaces, "credential-namespaces", []string{inClusterNamespace()}, "comma-separated namespaces whose Secrets and ConfigMaps hooks may name for caBundle, clientTLS, authorization and basicAuth, by default metactl's own (its Pod's namespace; outside a cluster \"default\", as for --leader-elect-namespace); spaces around an entry are ignored, and an entry that is neither a namespace name nor \"*\" is refused; a hook given as a Service may always use its Service's namespace; \"*\" allows every namespace, as metacontroller does. A controller naming another namespace does not start (Ready=False CredentialNotAllowed)")
	fs.BoolVar(&f.allowInsecureCredentials, "allow-insecure-credentials", false, "let hooks called over plain http send authorization, basicAuth and clientTLS credentials, for development only (metactl dev sets it); without it such a controller does not start (Ready=False InsecureCredentials)")
	fs.BoolVar(&f.requireServiceAccount, "require-service-account", false, "run only controllers annotated metactl.io/service-account (whose writes act as that ServiceAccount); any other is Ready=False Forbidden")
	fs.StringVar(&f.recordDir, "record-dir", "", "for development only (hidden: metactl dev --record-dir is the way to use it): record the hook calls of every controller (except those annotated "+hookrecord.Annotation+": \"false\") and write each, as it is made, into DIR/<kind>-<name>/NNNN-<hook>.json, Secret data replaced by digests, with no bound on the number of files (each call at most --record-max-bytes); empty (the default): only controllers annotated "+hookrecord.Annotation+": \"true\" are recorded, in memory only, served at "+hookrecord.Path+" on --metrics-addr for `metactl record fetch`")
	// --record-dir records every controller, whatever it opted for, to
	// disk without a bound: a development flag, not offered in run's help.
	_ = fs.MarkHidden("record-dir")
	fs.StringVar(&f.applyStrategy, "apply-strategy", "client-side", "how controllers write their children, unless a controller object's annotation "+engine.ApplyStrategyAnnotation+" says otherwise: client-side (three-way merge with the last-applied annotation, as metacontroller does by default) or server-side (server-side apply, field manager metactl/<controller>, drift of the fields it sets repaired); metacontroller's names dynamic-apply and server-side-apply (and three-way-merge for client-side) are accepted too (docs/apply-strategies.md)")
	fs.BoolVar(&f.applyForceConflicts, "apply-force-conflicts", true, "with the server-side strategy, take the fields another field manager owns when applying a child (as metacontroller does); false refuses such an apply, and the conflict is the sync's error")
	fs.BoolVar(&f.record, "record", true, "record the hook calls of the controllers annotated "+hookrecord.Annotation+": \"true\" and serve them at "+hookrecord.Path+" on --metrics-addr (requests and answers: the objects sent to the hook, Secret data replaced by digests); false ignores the annotation and records nothing")
	fs.IntVar(&f.recordMaxCalls, "record-max-calls", hookrecord.DefaultMaxCalls, "most recorded hook calls kept in memory per controller; past it the controller's oldest go (the newest show what its hook does now)")
	fs.Int64Var(&f.recordMaxBytes, "record-max-bytes", hookrecord.DefaultMaxBytes, "most bytes of recorded hook calls kept in memory, all controllers together; past it the oldest go, whichever controller made them")
	fs.BoolVar(&f.syncedCondition, "synced-condition", false, "write the metactl.io/Synced condition (how the last sync went, the retry count and next attempt) on the objects of every controller, except those annotated metactl.io/synced-condition: \"false\"; without it, only controllers annotated metactl.io/synced-condition: \"true\" write it (status belongs to the hook)")
	return cmd
}

// mutexProfileFraction and blockProfileRate: see run's --pprof-addr.
const (
	mutexProfileFraction = 100
	blockProfileRate     = int(time.Millisecond)
)

// defaultGCPercent is the garbage collector's target (GOGC) when the
// environment sets none: collect when the heap has grown by half since the
// last collection, not doubled. metactl's heap is mostly its cache, so this
// bounds its memory at about 1.5 times the cache instead of 2, for a few
// percent more CPU. GOGC in the environment overrides it.
const defaultGCPercent = 50

func run(ctx context.Context, f *runFlags) error {
	logger := klog.FromContext(ctx)
	if f.maxRetryDelay <= 0 {
		return fmt.Errorf("--max-retry-delay %v: want a positive duration", f.maxRetryDelay)
	}
	if f.stopGracePeriod <= 0 {
		return fmt.Errorf("--stop-grace-period %v: want a positive duration", f.stopGracePeriod)
	}
	applyStrategy, err := engine.ParseApplyStrategy(f.applyStrategy)
	if err != nil {
		return fmt.Errorf("--apply-strategy: %w", err)
	}
	if f.clientQPS < 0 || f.clientBurst < 0 {
		return fmt.Errorf("--client-qps %v, --client-burst %d: want 0 (no fixed limit) or a positive number", f.clientQPS, f.clientBurst)
	}
	credentialNamespaces, err := parseCredentialNamespaces(f.credentialNamespaces)
	if err != nil {
		return err
	}
	for _, v := range []struct {
		flag  string
		value int64
	}{
		{"--max-hook-response-bytes", f.maxResponseBytes},
		{"--hook-response-budget-bytes", f.responseBudget},
		{"--hook-decoded-budget-bytes", f.decodedBudget},
		{"--etag-cache-max-bytes", f.etagCacheMaxBytes},
		{"--max-related-objects", int64(f.maxRelated)},
		{"--record-max-calls", int64(f.recordMaxCalls)},
		{"--record-max-bytes", f.recordMaxBytes},
	} {
		if v.value <= 0 {
			return fmt.Errorf("%s %d: want a positive number", v.flag, v.value)
		}
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	_, cfg, err := f.kube.load("")
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = f.clientQPS, f.clientBurst
	if cfg.QPS > 0 && cfg.Burst == 0 {
		cfg.Burst = max(1, int(2*cfg.QPS))
	}
	if f.recordDir != "" && !f.record {
		return errors.New("--record-dir records every controller's hook calls: it cannot go with --record=false")
	}
	var recorder *hookrecord.Recorder
	if f.record {
		recorder = hookrecord.NewRecorder(hookrecord.RecorderOptions{MaxCalls: f.recordMaxCalls, MaxBytes: f.recordMaxBytes, Dir: f.recordDir})
	}
	traces, err := startTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing(ctx, traces)

	m, err := manager.New(manager.Options{
		Config:            cfg,
		Workers:           f.workers,
		DiscoveryInterval: f.discoveryInterval,
		CacheResync:       f.cacheResync,
		Hooks: hookclient.Options{
			MaxResponseBytes:    f.maxResponseBytes,
			ResponseBudgetBytes: f.responseBudget,
			DecodedBudgetBytes:  f.decodedBudget,
			EtagCacheMaxBytes:   f.etagCacheMaxBytes,
			Tracer:              traces.Tracer(),
		},
		MaxRelatedObjects: f.maxRelated,
		EventsQPS:         f.eventsQPS,
		EventsBurst:       f.eventsBurst,
		LeaderElection:    leaderElection(f),
		MaxRetryDelay:     f.maxRetryDelay,
		StopGracePeriod:   f.stopGracePeriod,
		HistoryMaxBytes:   historyMaxBytes(f.historyMaxBytes, f.explain),

		CredentialNamespaces:     credentialNamespaces,
		AllowInsecureCredentials: f.allowInsecureCredentials,
		RequireServiceAccount:    f.requireServiceAccount,
		SyncedCondition:          f.syncedCondition,
		Record:                   recorder,
		RecordAll:                f.recordDir != "",
		ApplyStrategy:            applyStrategy,
		RefuseApplyConflicts:     !f.applyForceConflicts,
	})
	if err != nil {
		return err
	}

	servers := []*http.Server{}
	if f.metricsAddr != "" {
		r := http.NewServeMux()
		r.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
		if f.explain {
			r.Handle(explain.Path, explain.Handler(m))
		}
		r.Handle(hookrecord.Path, hookrecord.Handler(recorder))
		servers = append(servers, &http.Server{Addr: f.metricsAddr, Handler: r, ReadHeaderTimeout: 10 * time.Second})
	}
	if f.healthAddr != "" {
		r := http.NewServeMux()
		r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		r.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !m.Ready() {
				http.Error(w, "caches not synced", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		servers = append(servers, &http.Server{Addr: f.healthAddr, Handler: r, ReadHeaderTimeout: 10 * time.Second})
	}
	if f.pprofAddr != "" {
		// Where goroutines wait on each other, for /debug/pprof/mutex and
		// /debug/pprof/block: one contention event in mutexProfileFraction,
		// and about one blocking event per blockProfileRate nanoseconds
		// blocked, cheap enough to leave on while profiles are served.
		runtime.SetMutexProfileFraction(mutexProfileFraction)
		runtime.SetBlockProfileRate(blockProfileRate)
		r := http.NewServeMux()
		r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
		r.HandleFunc("/debug/pprof/", pprof.Index)
		servers = append(servers, &http.Server{Addr: f.pprofAddr, Handler: r, ReadHeaderTimeout: 10 * time.Second})
	}
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
		logger.Info("Serving", "addr", ln.Addr().String())
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Endpoint failed", "addr", s.Addr)
			}
		}()
	}
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(shutdownCtx)
		}
	}()
	err = m.Run(ctx)
	if errors.Is(err, manager.ErrLeadershipLost) {
		// Exit at once: another replica may take over soon.
		logger.Error(err, "Exiting")
		stopTracing(ctx, traces)
		os.Exit(1)
	}
	return err
}

// startTracing sets up the export of spans from the OTEL_* environment
// variables (internal/tracing, docs/tracing.md): off without an OTLP endpoint.
func startTracing(ctx context.Context) (*tracing.Provider, error) {
	traces, err := tracing.New(ctx, tracing.Options{ServiceVersion: buildVersion().version})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if traces.Enabled() {
		klog.FromContext(ctx).Info("Exporting traces over OTLP")
	}
	return traces, nil
}

// stopTracing exports the spans not yet exported, for at most 5 seconds.
func stopTracing(ctx context.Context, traces *tracing.Provider) {
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := traces.Shutdown(shutdownCtx); err != nil {
		klog.FromContext(ctx).Error(err, "Exporting the last spans")
	}
}

func leaderElection(f *runFlags) *manager.LeaderElection {
	if !f.leaderElect {
		return nil
	}
	le := f.leaderElection
	return &le
}

// parseCredentialNamespaces returns the entries of --credential-namespaces
// without the spaces around them ("a, b" names b), or an error naming an
// entry that is neither a namespace name (a DNS-1123 label) nor "*".
func parseCredentialNamespaces(entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for _, entry := range entries {
		ns := strings.TrimSpace(entry)
		if ns != credentials.AllNamespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				return nil, fmt.Errorf("--credential-namespaces: %q is neither a namespace name nor \"*\": %s", entry, strings.Join(msgs, "; "))
			}
		}
		out = append(out, ns)
	}
	return out, nil
}

// inClusterNamespace is the namespace this pod runs in, else "default".
func inClusterNamespace() string {
	if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(data) > 0 {
		return string(data)
	}
	return "default"
}

// historyMaxBytes maps --history-max-bytes to manager.Options: its 0
// disables the record, and so does --explain=false, for explain is the
// record's only reader (the Synced condition is written from each sync's
// result, not from the record).
func historyMaxBytes(flag int64, explain bool) int64 {
	if flag <= 0 || !explain {
		return -1
	}
	return flag
}
