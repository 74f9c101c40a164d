package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/manager"
	"github.com/metactl/metactl/pkg/metrics"
)

// runFlags are the flags of `metactl run`.
type runFlags struct {
	kubeconfig        string
	workers           int
	clientQPS         float32
	clientBurst       int
	discoveryInterval time.Duration
	cacheResync       time.Duration
	metricsAddr       string
	healthAddr        string
	pprofAddr         string
	maxResponseBytes  int64
}

func newRunCommand() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run every CompositeController in the cluster",
		Long: `run connects to the cluster (--kubeconfig, else $KUBECONFIG, else the
in-cluster config), watches CompositeController objects and runs one
controller for each. It stops on SIGINT or SIGTERM after finishing the
syncs in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default $KUBECONFIG, else the in-cluster config")
	fs.IntVar(&f.workers, "workers", 32, "parents each controller syncs at once; hook calls of different parents run concurrently, so a slow hook needs more")
	fs.Float32Var(&f.clientQPS, "client-qps", 2000, "sustained requests per second to the API server, shared by all controllers; above what one API server sustains, so the server's own priority and fairness sets the pace")
	fs.IntVar(&f.clientBurst, "client-burst", 4000, "requests allowed in a burst above --client-qps")
	fs.DurationVar(&f.discoveryInterval, "discovery-interval", 30*time.Second, "how often to refresh the API server's resource list")
	fs.DurationVar(&f.cacheResync, "cache-resync", 0, "informer resync period; 0 disables (a parent is resynced only by events, resyncPeriodSeconds or resyncAfterSeconds)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", ":9999", "address serving Prometheus metrics at /metrics; empty disables")
	fs.StringVar(&f.healthAddr, "health-addr", ":9998", "address serving /healthz and /readyz; empty disables")
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "address serving Go's /debug/pprof/ profiles; empty (the default) disables")
	fs.Int64Var(&f.maxResponseBytes, "max-hook-response-bytes", 16<<20, "largest hook response accepted")
	return cmd
}

// restConfig loads --kubeconfig, else $KUBECONFIG, else the in-cluster config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig or $KUBECONFIG, and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

func run(ctx context.Context, f *runFlags) error {
	logger := klog.FromContext(ctx)
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = f.clientQPS, f.clientBurst
	cfg.UserAgent = "metactl/" + version

	m, err := manager.New(manager.Options{
		Config:            cfg,
		Workers:           f.workers,
		DiscoveryInterval: f.discoveryInterval,
		CacheResync:       f.cacheResync,
		Hooks:             hooks.Options{MaxResponseBytes: f.maxResponseBytes},
	})
	if err != nil {
		return err
	}

	servers := []*http.Server{}
	if f.metricsAddr != "" {
		r := mux.NewRouter()
		r.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Addr: f.metricsAddr, Handler: r, ReadHeaderTimeout: 10 * time.Second})
	}
	if f.healthAddr != "" {
		r := mux.NewRouter()
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
		r := mux.NewRouter()
		r.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		r.HandleFunc("/debug/pprof/profile", pprof.Profile)
		r.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		r.HandleFunc("/debug/pprof/trace", pprof.Trace)
		r.PathPrefix("/debug/pprof/").HandlerFunc(pprof.Index)
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
	return m.Run(ctx)
}

// addKlogFlags adds klog's flags (-v and friends) to cmd, with --log-level
// as another name for -v.
func addKlogFlags(cmd *cobra.Command) {
	gofs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(gofs)
	cmd.PersistentFlags().AddGoFlagSet(gofs)
	cmd.PersistentFlags().AddGoFlag(&flag.Flag{Name: "log-level", Usage: "log verbosity, same as -v", Value: gofs.Lookup("v").Value, DefValue: "0"})
}
