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
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/debugauth"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/internal/shard"
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
	responseFloor     int64
	responseMinRate   int64
	responseGrace     time.Duration
	decodedBudget     int64
	decodedFloor      int64
	etagCacheMaxBytes int64
	maxRelated        int
	maxRequestBytes   int64
	requestBudget     int64
	maxRelatedRules   int
	maxResources      int
	maxRetryDelay     time.Duration
	stopGracePeriod   time.Duration
	historyMaxBytes   int64
	eventsQPS         float32
	eventsBurst       int
	eventSource       string
	leaderElect       bool
	leaderElection    manager.LeaderElection
	shardBuckets      int
	// credentialNamespaces and allowInsecureCredentials: see
	// manager.Options.
	credentialNamespaces     []string
	allowInsecureCredentials bool
	// allowLoopbackHooks and allowLinkLocalHooks: see
	// hookclient.DialRule.
	allowLoopbackHooks  bool
	allowLinkLocalHooks bool
	// requireServiceAccount: see manager.Options.RequireServiceAccount.
	requireServiceAccount bool
	// syncedCondition: see manager.Options.SyncedCondition.
	syncedCondition bool
	// explain serves explain.Path on the metrics address.
	explain bool
	// debugAuth guards explain.Path and hookrecord.Path (debugauth).
	debugAuth bool
	// recordDir, recordMaxCalls and recordMaxBytes: see
	// hookrecord.RecorderOptions; recordDir also records every
	// controller (manager.Options.RecordAll).
	recordDir      string
	recordMaxCalls int
	recordMaxBytes int64
	// record: false records nothing (manager.Options.Record nil).
	record bool
	// applyStrategy and refuseApplyConflicts: see
	// manager.Options.ApplyStrategy and RefuseApplyConflicts.
	applyStrategy        string
	refuseApplyConflicts bool
}

func newRunCommand() *cobra.Command { return runCommand(&runFlags{}) }

// runCommand is `metactl run`, whose flags set f.
func runCommand(f *runFlags) *cobra.Command {
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
at once. With --shard-buckets too, every replica runs them, each for the
parents of the buckets it holds (docs/scaling.md). A failing sync is retried with a backoff that doubles from 250ms
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
	fs.IntVar(&f.workers, "workers", loop.DefaultWorkers, "most parents each controller syncs at once; a slow hook needs more (docs/cli.md)")
	fs.Float32Var(&f.clientQPS, "client-qps", 0, "fixed limit of API requests per second, all controllers; 0: none, the server's 429s set the pace")
	fs.IntVar(&f.clientBurst, "client-burst", 0, "with --client-qps, requests allowed at once above it; 0: twice --client-qps")
	fs.DurationVar(&f.discoveryInterval, "discovery-interval", 30*time.Second, "how often to refresh the API server's resource list")
	fs.DurationVar(&f.cacheResync, "cache-resync", 30*time.Minute, "every parent and decorated object is synced again this often; 0 disables")
	fs.StringVar(&f.metricsAddr, "metrics-addr", ":9999", "address serving Prometheus metrics at /metrics; empty disables")
	fs.BoolVar(&f.debugAuth, "debug-auth", true, "serve /debug/explain and /debug/record only to callers the API server authenticates and authorizes")
	fs.BoolVar(&f.explain, "explain", true, "serve "+explain.Path+" on --metrics-addr for metactl explain; false also stops the record of syncs")
	fs.StringVar(&f.healthAddr, "health-addr", ":9998", "address serving /healthz and /readyz; empty disables")
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "address serving Go's /debug/pprof/ profiles, mutex and block ones included; empty disables")
	fs.Float32Var(&f.eventsQPS, "events-qps", 0, "Events per second per object once --events-burst is spent; 0: client-go's one per 5 minutes")
	fs.IntVar(&f.eventsBurst, "events-burst", 0, "Events per object allowed at once; 0 keeps client-go's default of 25")
	fs.StringVar(&f.eventSource, "event-source-component", manager.DefaultEventSourceComponent, "source component of metactl's Events (metactl); metacontroller keeps filters written for it matching")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "run controllers only while holding a Lease, for several replicas (the shipped Deployment sets it)")
	fs.StringVar(&f.leaderElection.Namespace, "leader-elect-namespace", inClusterNamespace(), "namespace of the leader Lease")
	fs.StringVar(&f.leaderElection.Name, "leader-elect-lease-name", "metactl", "name of the leader Lease")
	fs.DurationVar(&f.leaderElection.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long standbys wait after the leader's last renewal before taking over")
	fs.DurationVar(&f.leaderElection.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops (must be shorter than the lease duration)")
	fs.DurationVar(&f.leaderElection.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "pace of acquire and renew attempts")
	fs.IntVar(&f.shardBuckets, "shard-buckets", 0, "share parents among replicas in this many buckets, the same on each; needs --leader-elect")
	fs.DurationVar(&f.maxRetryDelay, "max-retry-delay", loop.MaxRetryDelay, "longest wait before a failing sync is retried; the backoff doubles from 250ms up to it")
	fs.DurationVar(&f.stopGracePeriod, "stop-grace-period", loop.DefaultStopGracePeriod, "longest wait for a stopping controller's cancelled syncs; those still running are abandoned")
	fs.Int64Var(&f.historyMaxBytes, "history-max-bytes", manager.DefaultHistoryMaxBytes, "memory budget of the record of syncs metactl explain shows, all controllers; 0 disables it")
	fs.Int64Var(&f.maxResponseBytes, "max-hook-response-bytes", hookclient.DefaultMaxResponseBytes, "largest hook response accepted")
	fs.Int64Var(&f.responseBudget, "hook-response-budget-bytes", hookclient.DefaultResponseBudgetBytes, "most bytes of hook responses held in memory at once, all controllers (docs/cli.md)")
	fs.Int64Var(&f.responseFloor, "hook-response-floor-bytes", hookclient.DefaultResponseFloorBytes, "each controller's own room for hook responses, which no other controller takes (docs/cli.md)")
	fs.Int64Var(&f.responseMinRate, "hook-response-min-bytes-per-second", hookclient.DefaultMinResponseBytesPerSecond, "slowest a hook response's body may come after --hook-response-grace; slower fails (docs/cli.md)")
	fs.DurationVar(&f.responseGrace, "hook-response-grace", hookclient.DefaultResponseGrace, "time a hook response's body may take beyond its bytes at --hook-response-min-bytes-per-second")
	fs.Int64Var(&f.decodedBudget, "hook-decoded-budget-bytes", hookclient.DefaultDecodedBudgetBytes, "most memory of the objects decoded from hook responses at once, all controllers (docs/cli.md)")
	fs.Int64Var(&f.decodedFloor, "hook-decoded-floor-bytes", hookclient.DefaultDecodedFloorBytes, "each controller's own room for decoded hook responses, which no other controller takes")
	fs.Int64Var(&f.etagCacheMaxBytes, "etag-cache-max-bytes", hookclient.DefaultEtagCacheMaxBytes, "most bytes of responses kept for hooks with etag enabled, all controllers; least recent go first")
	fs.IntVar(&f.maxRelated, "max-related-objects", related.DefaultMaxObjects, "most related objects a customize hook may select for one parent; more fails the sync")
	fs.Int64Var(&f.maxRequestBytes, "max-hook-request-bytes", engine.DefaultMaxRequestBytes, "most bytes of children and related objects one sync sends its hook; more fails the sync")
	fs.Int64Var(&f.requestBudget, "hook-request-budget-bytes", engine.DefaultRequestBudgetBytes, "most bytes of objects held for hook requests at once, all controllers; one at most half")
	fs.IntVar(&f.maxRelatedRules, "max-related-rules", related.DefaultMaxRules, "most relatedResources rules in one customize answer; more fails the sync")
	fs.IntVar(&f.maxResources, "max-controller-resources", engine.DefaultMaxResources, "most distinct resources one controller watches, its spec's and its customize answers' together")
	fs.StringSliceVar(&f.credentialNamespaces, "credential-namespaces", []string{inClusterNamespace()}, "namespaces whose Secrets and ConfigMaps hooks' credentials may name; \"*\": all (docs/cli.md)")
	fs.BoolVar(&f.allowLoopbackHooks, "allow-loopback-hooks", false, "let hooks be called at loopback addresses (127.0.0.0/8, ::1); metactl dev sets it")
	fs.BoolVar(&f.allowLinkLocalHooks, "allow-link-local-hooks", false, "let hooks be called at link-local (169.254.0.0/16, fe80::/10) and cloud metadata addresses")
	fs.BoolVar(&f.allowInsecureCredentials, "allow-insecure-credentials", false, "let hooks called over plain http send credentials: for development only (metactl dev sets it)")
	fs.BoolVar(&f.requireServiceAccount, "require-service-account", false, "run only controllers annotated metactl.io/service-account; others are Ready=False Forbidden")
	fs.StringVar(&f.recordDir, "record-dir", "", "record every controller's hook calls into DIR, unbounded: for development (metactl dev)")
	// --record-dir records every controller, whatever it opted for, to
	// disk without a bound: a development flag, not offered in run's help.
	_ = fs.MarkHidden("record-dir")
	fs.StringVar(&f.applyStrategy, "apply-strategy", "client-side", "how children are written: client-side or server-side, unless a controller's annotation says")
	fs.BoolVar(&f.refuseApplyConflicts, "refuse-apply-conflicts", false, "server-side strategy: refuse, not take, fields another field manager owns; the sync fails")
	fs.BoolVar(&f.record, "record", true, "record the hook calls of controllers annotated "+hookrecord.Annotation+": \"true\"; false: none")
	fs.IntVar(&f.recordMaxCalls, "record-max-calls", hookrecord.DefaultMaxCalls, "most recorded hook calls kept per controller; past it its oldest go")
	fs.Int64Var(&f.recordMaxBytes, "record-max-bytes", hookrecord.DefaultMaxBytes, "most bytes of recorded hook calls kept, all controllers; past it the oldest go")
	fs.BoolVar(&f.syncedCondition, "synced-condition", false, "write the metactl.io/Synced condition on every controller's objects, not only annotated ones")
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

// run runs the manager until ctx is done, serving its endpoints.
func run(ctx context.Context, f *runFlags) error {
	checked, err := checkRunFlags(f)
	if err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	cfg, err := runConfig(f)
	if err != nil {
		return err
	}
	recorder, err := newRecorder(f)
	if err != nil {
		return err
	}
	traces, err := startTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing(ctx, traces)

	m, err := manager.New(managerOptions(f, checked, cfg, recorder, traces))
	if err != nil {
		return err
	}
	guard, err := debugGuard(f, cfg)
	if err != nil {
		return err
	}
	stopServing, err := serve(ctx, endpoints(f, m, recorder, guard))
	if err != nil {
		return err
	}
	defer stopServing()
	err = m.Run(ctx)
	if errors.Is(err, manager.ErrLeadershipLost) {
		// Exit at once: another replica may take over soon.
		klog.FromContext(ctx).Error(err, "Exiting")
		stopTracing(ctx, traces)
		os.Exit(1)
	}
	return err
}

// checkedRunFlags are the flags of run that checkRunFlags parsed.
type checkedRunFlags struct {
	applyStrategy        engine.ApplyStrategy
	credentialNamespaces []string
}

// checkRunFlags refuses values of f that metactl run cannot take, naming
// the flag, and parses those that need it.
func checkRunFlags(f *runFlags) (checkedRunFlags, error) {
	var checked checkedRunFlags
	if f.maxRetryDelay <= 0 {
		return checked, fmt.Errorf("--max-retry-delay %v: want a positive duration", f.maxRetryDelay)
	}
	if f.shardBuckets < 0 || f.shardBuckets > shard.MaxBuckets {
		return checked, fmt.Errorf("--shard-buckets %d: want 0 (no sharding) to %d", f.shardBuckets, shard.MaxBuckets)
	}
	if f.shardBuckets > 0 && !f.leaderElect {
		return checked, fmt.Errorf("--shard-buckets %d needs --leader-elect: the buckets' Leases share its namespace, name and identity", f.shardBuckets)
	}
	if f.stopGracePeriod <= 0 {
		return checked, fmt.Errorf("--stop-grace-period %v: want a positive duration", f.stopGracePeriod)
	}
	var err error
	if checked.applyStrategy, err = engine.ParseApplyStrategy(f.applyStrategy); err != nil {
		return checked, fmt.Errorf("--apply-strategy: %w", err)
	}
	if errs := validation.IsQualifiedName(f.eventSource); len(errs) > 0 {
		return checked, fmt.Errorf("--event-source-component %q: %s", f.eventSource, strings.Join(errs, "; "))
	}
	if f.clientQPS < 0 || f.clientBurst < 0 {
		return checked, fmt.Errorf("--client-qps %v, --client-burst %d: want 0 (no fixed limit) or a positive number", f.clientQPS, f.clientBurst)
	}
	if f.responseGrace <= 0 {
		return checked, fmt.Errorf("--hook-response-grace %v: want a positive duration", f.responseGrace)
	}
	if checked.credentialNamespaces, err = parseCredentialNamespaces(f.credentialNamespaces); err != nil {
		return checked, err
	}
	for _, v := range []struct {
		flag  string
		value int64
	}{
		{"--max-hook-response-bytes", f.maxResponseBytes},
		{"--hook-response-budget-bytes", f.responseBudget},
		{"--hook-response-floor-bytes", f.responseFloor},
		{"--hook-response-min-bytes-per-second", f.responseMinRate},
		{"--hook-decoded-budget-bytes", f.decodedBudget},
		{"--hook-decoded-floor-bytes", f.decodedFloor},
		{"--etag-cache-max-bytes", f.etagCacheMaxBytes},
		{"--max-related-objects", int64(f.maxRelated)},
		{"--max-hook-request-bytes", f.maxRequestBytes},
		{"--hook-request-budget-bytes", f.requestBudget},
		{"--max-related-rules", int64(f.maxRelatedRules)},
		{"--max-controller-resources", int64(f.maxResources)},
		{"--record-max-calls", int64(f.recordMaxCalls)},
		{"--record-max-bytes", f.recordMaxBytes},
	} {
		if v.value <= 0 {
			return checked, fmt.Errorf("%s %d: want a positive number", v.flag, v.value)
		}
	}
	return checked, nil
}

// runConfig is the client configuration of f's kubeconfig, with the rate
// limit of --client-qps and --client-burst.
func runConfig(f *runFlags) (*rest.Config, error) {
	_, cfg, err := f.kube.load("")
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = f.clientQPS, f.clientBurst
	if cfg.QPS > 0 && cfg.Burst == 0 {
		cfg.Burst = max(1, int(2*cfg.QPS))
	}
	return cfg, nil
}

// newRecorder is the recorder of hook calls that --record, --record-dir,
// --record-max-calls and --record-max-bytes ask for; nil for none.
func newRecorder(f *runFlags) (*hookrecord.Recorder, error) {
	if f.recordDir != "" && !f.record {
		return nil, errors.New("--record-dir records every controller's hook calls: it cannot go with --record=false")
	}
	if !f.record {
		return nil, nil
	}
	return hookrecord.NewRecorder(hookrecord.RecorderOptions{MaxCalls: f.recordMaxCalls, MaxBytes: f.recordMaxBytes, Dir: f.recordDir}), nil
}

// managerOptions are the manager's options from f, as checked, with the
// client configuration, the recorder of hook calls and the tracer.
func managerOptions(f *runFlags, checked checkedRunFlags, cfg *rest.Config, recorder *hookrecord.Recorder, traces *tracing.Provider) manager.Options {
	return manager.Options{
		Config:            cfg,
		Workers:           f.workers,
		DiscoveryInterval: f.discoveryInterval,
		CacheResync:       f.cacheResync,
		Hooks: hookclient.Options{
			MaxResponseBytes:          f.maxResponseBytes,
			ResponseBudgetBytes:       f.responseBudget,
			ResponseFloorBytes:        f.responseFloor,
			MinResponseBytesPerSecond: f.responseMinRate,
			ResponseGrace:             f.responseGrace,
			DecodedBudgetBytes:        f.decodedBudget,
			DecodedFloorBytes:         f.decodedFloor,
			EtagCacheMaxBytes:         f.etagCacheMaxBytes,
			Tracer:                    traces.Tracer(),
			Dial:                      &hookclient.DialRule{AllowLoopback: f.allowLoopbackHooks, AllowLinkLocal: f.allowLinkLocalHooks},
		},
		MaxRelatedObjects:      f.maxRelated,
		MaxRequestBytes:        f.maxRequestBytes,
		RequestBudgetBytes:     f.requestBudget,
		MaxRelatedRules:        f.maxRelatedRules,
		MaxControllerResources: f.maxResources,
		EventsQPS:              f.eventsQPS,
		EventsBurst:            f.eventsBurst,
		EventSourceComponent:   f.eventSource,
		LeaderElection:         leaderElection(f),
		ShardBuckets:           f.shardBuckets,
		MaxRetryDelay:          f.maxRetryDelay,
		StopGracePeriod:        f.stopGracePeriod,
		HistoryMaxBytes:        historyMaxBytes(f.historyMaxBytes, f.explain),

		CredentialNamespaces:     checked.credentialNamespaces,
		AllowInsecureCredentials: f.allowInsecureCredentials,
		RequireServiceAccount:    f.requireServiceAccount,
		SyncedCondition:          f.syncedCondition,
		Record:                   recorder,
		RecordAll:                f.recordDir != "",
		ApplyStrategy:            checked.applyStrategy,
		RefuseApplyConflicts:     f.refuseApplyConflicts,
	}
}

// debugGuard is the guard of the debug endpoints that --debug-auth asks
// for, reviewing with cfg's client; nil for none.
func debugGuard(f *runFlags, cfg *rest.Config) (*debugauth.Guard, error) {
	if !f.debugAuth {
		return nil, nil
	}
	authn, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return debugauth.New(debugauth.Options{Tokens: authn.TokenReviews(), Access: authz.SubjectAccessReviews()}), nil
}

// endpoints are the HTTP servers that --metrics-addr, --health-addr and
// --pprof-addr ask for, of m and recorder, the debug endpoints behind
// guard (nil: none); an empty address asks for none.
func endpoints(f *runFlags, m *manager.Manager, recorder *hookrecord.Recorder, guard *debugauth.Guard) []*http.Server {
	var servers []*http.Server
	if f.metricsAddr != "" {
		servers = append(servers, metricsServer(f.metricsAddr, f.explain, m, recorder, guard))
	}
	if f.healthAddr != "" {
		servers = append(servers, healthServer(f.healthAddr, m))
	}
	if f.pprofAddr != "" {
		servers = append(servers, pprofServer(f.pprofAddr))
	}
	return servers
}

// metricsServer serves /metrics at addr, to anyone (a ServiceMonitor
// scrapes it without credentials), and the record of hook calls
// (hookrecord.Path) of recorder and, with explain, m's explain.Path,
// behind guard when there is one: to a caller allowed to list the
// resources of a controller's hook calls, or to get the object explained.
func metricsServer(addr string, explainOn bool, m *manager.Manager, recorder *hookrecord.Recorder, guard *debugauth.Guard) *http.Server {
	r := http.NewServeMux()
	r.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	protect := func(h http.Handler, _ debugauth.Attributes) http.Handler { return h }
	if guard != nil {
		protect = guard.Protect
	}
	if explainOn {
		r.Handle(explain.Path, protect(explain.Handler(m), explain.Attributes))
	}
	r.Handle(hookrecord.Path, protect(hookrecord.Handler(recorder), hookrecord.Attributes(m.HookResources)))
	return &http.Server{Addr: addr, Handler: r, ReadHeaderTimeout: 10 * time.Second}
}

// healthServer serves /healthz and /readyz (m's caches synced) at addr.
func healthServer(addr string, m *manager.Manager) *http.Server {
	r := http.NewServeMux()
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	r.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.Ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return &http.Server{Addr: addr, Handler: r, ReadHeaderTimeout: 10 * time.Second}
}

// pprofServer serves Go's profiles at addr, and turns on the sampling of
// the mutex and block profiles.
func pprofServer(addr string) *http.Server {
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
	return &http.Server{Addr: addr, Handler: r, ReadHeaderTimeout: 10 * time.Second}
}

// serve listens on each server's address and serves it in the background;
// the returned func shuts them down, waiting at most 5 seconds. A server
// that cannot listen is an error; the servers started before it are then
// left running, as metactl exits.
func serve(ctx context.Context, servers []*http.Server) (func(), error) {
	logger := klog.FromContext(ctx)
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return nil, fmt.Errorf("listening on %s: %w", s.Addr, err)
		}
		logger.Info("Serving", "addr", ln.Addr().String())
		go func() {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "Endpoint failed", "addr", s.Addr)
			}
		}()
	}
	return func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(shutdownCtx)
		}
	}, nil
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
// disables the record, as the option's does, and so does --explain=false,
// for explain is the record's only reader (the Synced condition is
// written from each sync's result, not from the record).
func historyMaxBytes(flag int64, explain bool) int64 {
	if flag <= 0 || !explain {
		return 0
	}
	return flag
}
