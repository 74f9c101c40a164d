package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/controlplane"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

type devFlags struct {
	assets      string
	dir         string
	example     string
	examplesDir string
	workers     int
	recordDir   string
}

func newDevCommand() *cobra.Command {
	f := &devFlags{}
	cmd := &cobra.Command{
		Use:   "metactl-dev",
		Short: "Run a local control plane with metactl in it (and optionally an example)",
		Long: `metactl-dev, also run as "metactl dev", starts a one-node cluster on this
machine (loopback only): etcd, kube-apiserver, kube-controller-manager with
its default controllers, kube-scheduler, and kwok simulating the node, so
that Pods become Running and Ready without running any container. It
installs metactl's CRDs, writes a kubeconfig, and runs the manager in this
process. With --example it also runs that example's hook and applies its
CRD, controller and sample object. Ctrl-C, SIGTERM, or closing the pipe its
output goes to stops everything; every process it started ends with it,
even if it is killed.

The binaries come from --assets, $KUBEBUILDER_ASSETS, or the cache that
hack/testenv.sh fills; from a checkout of metactl, it runs that script
when they are missing (about 10 minutes the first time).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := stopContext(cmd.Context())
			defer stop()
			err := dev(ctx, cmd.OutOrStdout(), f)
			if err != nil && ctx.Err() != nil {
				// Stopped as asked while starting: what failed is the
				// consequence, not the cause.
				klog.V(1).InfoS("Interrupted", "err", err)
				return nil
			}
			return err
		},
	}
	home, _ := os.UserHomeDir()
	fs := cmd.Flags()
	fs.StringVar(&f.assets, "assets", "", "folder with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kubectl")
	fs.StringVar(&f.dir, "dir", filepath.Join(home, ".cache", "metactl", "dev"), "folder for the kubeconfig and logs")
	fs.StringVar(&f.example, "example", "", "example to run: a folder name under examples/python or examples/js")
	fs.StringVar(&f.examplesDir, "examples-dir", "examples", "folder holding the examples")
	fs.IntVar(&f.workers, "workers", loop.DefaultWorkers, "most parents each controller syncs at once, as metactl run --workers")
	fs.StringVar(&f.recordDir, "record-dir", "", "record every controller's hook calls into DIR/<kind>-<name>/, for metactl replay (docs/cli.md)")
	return cmd
}

func dev(ctx context.Context, out io.Writer, f *devFlags) error {
	// Errors writing out (a closed pipe) are ignored: stopContext stops
	// everything then.
	say := func(format string, args ...any) { _, _ = fmt.Fprintf(out, "metactl dev: "+format+"\n", args...) }
	var ex *example
	if f.example != "" { // before anything starts
		var err error
		if ex, err = findExample(f.examplesDir, f.example); err != nil {
			return err
		}
	}
	assets, err := controlPlaneAssets(ctx, say, f.assets)
	if err != nil {
		return err
	}

	say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (one fake node) from %s", assets)
	cp, err := controlplane.Start(controlplane.Options{AssetsDir: assets, Cluster: true, TieToThisProcess: true, Dir: f.dir})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		if err := cp.Stop(); err != nil {
			klog.FromContext(ctx).Error(err, "Stopping the control plane")
		}
	}()
	say("control plane ready; to use it:\n\n    export KUBECONFIG=%s\n", cp.KubeconfigPath)

	m, recorder, err := newManager(cp, f)
	if err != nil {
		return err
	}
	if f.recordDir != "" {
		say("recording every controller's hook calls into %s", f.recordDir)
	}
	stopExplain, err := serveExplain(m, recorder, cp.KubeconfigPath)
	if err != nil {
		return err
	}
	defer stopExplain()
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	managerDone := make(chan error, 1)
	go func() { managerDone <- m.Run(runCtx) }()

	if ex != nil {
		stopHook, err := runExample(ctx, say, cp, ex)
		if err != nil {
			cancelRun()
			<-managerDone
			return err
		}
		defer stopHook()
	}
	if note := leftOut(os.Environ()); note != "" {
		say("%s", note)
	}
	say("metactl is running; Ctrl-C stops everything")
	return awaitEnd(ctx, say, cp, runCtx, cancelRun, managerDone)
}

// leftOut says what metactl dev leaves out of what metactl run does, when
// env (KEY=value pairs) shows the user expects it: the OTEL_* variables
// configure run's tracing, which dev does not start; nor does dev serve
// /metrics. "" when no OTEL_* variable is set.
func leftOut(env []string) string {
	var set []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		return ""
	}
	sort.Strings(set)
	return fmt.Sprintf("%s set, but metactl dev exports no traces and serves no /metrics (only /debug/explain): "+
		"run metactl run against the dev cluster (KUBECONFIG above) for those (docs/tracing.md, docs/monitoring.md)", strings.Join(set, ", "))
}

// controlPlaneAssets returns the folder of the control plane's binaries:
// assets (--assets) when set, else controlplane.AssetsDir's, else, in a
// checkout of metactl, the one hack/testenv.sh fills, building them.
func controlPlaneAssets(ctx context.Context, say func(string, ...any), assets string) (string, error) {
	if assets != "" {
		return assets, nil
	}
	assets, err := controlplane.AssetsDir()
	if err == nil {
		return assets, nil
	}
	if _, statErr := os.Stat("hack/testenv.sh"); statErr != nil {
		return "", err
	}
	say("building the control-plane binaries with hack/testenv.sh (about 10 minutes the first time; when another build is running, it waits for that one and says so)...")
	cmd := exec.CommandContext(ctx, "hack/testenv.sh")
	cmd.Stderr = os.Stderr
	built, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/testenv.sh: %w", err)
	}
	return string(bytes.TrimSpace(built)), nil
}

// newManager returns the manager of cp's cluster, with the recorder of
// hook calls it feeds.
//
// A single-user local cluster (its hooks are called over plain http,
// service hooks rewritten to http://127.0.0.1): whoever can create a
// controller object owns every namespace, so hooks' credentials may
// come from any namespace and be sent over http, as metactl run allows
// only with --credential-namespaces='*' and
// --allow-insecure-credentials. Hooks run beside it, on loopback, which
// metactl run refuses without --allow-loopback-hooks: allowed here;
// link-local and cloud metadata addresses are refused, as by metactl run.
//
// The hook calls of controllers annotated hookrecord.Annotation
// "true" are recorded in memory, for `metactl record fetch`, as under
// metactl run; with --record-dir, every controller's (but those
// annotated "false"), also written there. The record of syncs that
// metactl explain shows is kept within metactl run's default budget.
func newManager(cp *controlplane.ControlPlane, f *devFlags) (*manager.Manager, *hookrecord.Recorder, error) {
	recorder := hookrecord.NewRecorder(hookrecord.RecorderOptions{Dir: f.recordDir})
	m, err := manager.New(manager.Options{Config: cp.Config, Workers: f.workers, DiscoveryInterval: 2 * time.Second, MaxRetryDelay: 5 * time.Second,
		CredentialNamespaces: []string{credentials.AllNamespaces}, AllowInsecureCredentials: true,
		Hooks:           hookclient.Options{Dial: &hookclient.DialRule{AllowLoopback: true}},
		HistoryMaxBytes: manager.DefaultHistoryMaxBytes, Record: recorder, RecordAll: f.recordDir != ""})
	if err != nil {
		return nil, nil, err
	}
	return m, recorder, nil
}

// awaitEnd waits until ctx is done, the manager (run with runCtx, which
// cancelRun cancels) returns its error on managerDone, or cp is lost, and
// returns with the manager stopped.
func awaitEnd(ctx context.Context, say func(string, ...any), cp *controlplane.ControlPlane, runCtx context.Context, cancelRun context.CancelFunc, managerDone <-chan error) error {
	gone := func(err error) error {
		say("the control plane is gone: %v; stopping", err)
		return fmt.Errorf("the control plane is gone: %w", err)
	}
	select {
	case <-ctx.Done():
	case err := <-managerDone:
		// metactl may fail first when its cluster goes away.
		if err != nil && ctx.Err() == nil {
			if readyErr := cp.Ready(ctx, 2*time.Second); readyErr != nil {
				return errors.Join(gone(readyErr), err)
			}
		}
		return err
	case err := <-cp.Lost(runCtx, 2*time.Second):
		cancelRun()
		<-managerDone
		return gone(err)
	}
	cancelRun()
	return <-managerDone
}

// example is one of the examples: a hook and the files to apply.
type example struct {
	name, dir, interpreter, hookFile string
}

// exampleLanguages maps each examples/ subfolder to its interpreter and
// hook file.
var exampleLanguages = []struct{ folder, interpreter, hookFile string }{
	{"python", "python3", "hook.py"},
	{"js", "node", "hook.js"},
}

// findExample finds the example called name under examplesDir; when there
// is none, the error lists those there are.
func findExample(examplesDir, name string) (*example, error) {
	var valid []string
	for _, lang := range exampleLanguages {
		dirs, _ := filepath.Glob(filepath.Join(examplesDir, lang.folder, "*", lang.hookFile))
		for _, hook := range dirs {
			dir := filepath.Dir(hook)
			if filepath.Base(dir) == name {
				return &example{name: name, dir: dir, interpreter: lang.interpreter, hookFile: lang.hookFile}, nil
			}
			valid = append(valid, filepath.Base(dir))
		}
	}
	if len(valid) == 0 {
		return nil, fmt.Errorf("no example %q: %s holds no examples (run metactl dev from a checkout of metactl, or set --examples-dir)", name, examplesDir)
	}
	sort.Strings(valid)
	return nil, fmt.Errorf("no example %q under %s; the examples are: %s", name, examplesDir, strings.Join(valid, ", "))
}

// runExample starts the example's hook on a free loopback port and applies
// its CRD, its controller (webhooks pointed at the hook) and its sample.
func runExample(ctx context.Context, say func(string, ...any), cp *controlplane.ControlPlane, ex *example) (func(), error) {
	dir, interpreter, hookFile := ex.dir, ex.interpreter, ex.hookFile
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(cp.Dir, ex.name+"-hook.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	hook := exec.Command(interpreter, filepath.Join(dir, hookFile), "--port", fmt.Sprint(port))
	hook.Stdout, hook.Stderr = logFile, logFile
	if err := controlplane.StartTied(hook); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the %s hook: %w", ex.name, err)
	}
	stop := func() {
		controlplane.StopTied(5*time.Second, hook)
		logFile.Close()
	}
	ok := false
	defer func() {
		if !ok {
			stop()
		}
	}()
	hookURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("the %s hook did not listen on %s (log: %s): %w", ex.name, hookURL, logPath, err)
	}
	say("%s hook (%s %s) serving at %s, log in %s", ex.name, interpreter, hookFile, hookURL, logPath)

	applier, err := newApplier(cp)
	if err != nil {
		return nil, err
	}
	for _, file := range []string{"crd.yaml", "controller.yaml", "sample.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, file)); errors.Is(err, os.ErrNotExist) && file != "controller.yaml" {
			continue // an example over built-in resources has no CRD
		}
		err := applier.applyFile(ctx, filepath.Join(dir, file), func(obj *unstructured.Unstructured) {
			if obj.GetKind() == "CompositeController" || obj.GetKind() == "DecoratorController" {
				pointHooksAt(obj, hookURL)
			}
		})
		if err != nil {
			return nil, err
		}
		say("applied %s", filepath.Join(dir, file))
	}
	say("try the commands in %s", filepath.Join(dir, "README.md"))
	ok = true
	return stop, nil
}

// pointHooksAt replaces each webhook's service with a URL on base, keeping
// its path.
func pointHooksAt(obj *unstructured.Unstructured, base string) {
	hooks, _, _ := unstructured.NestedMap(obj.Object, "spec", "hooks")
	for name, h := range hooks {
		hook, ok := h.(map[string]any)
		if !ok {
			continue
		}
		webhook, ok := hook["webhook"].(map[string]any)
		if !ok {
			continue
		}
		path, _ := webhook["path"].(string)
		if path == "" {
			path = "/" + name
		}
		delete(webhook, "service")
		delete(webhook, "path")
		webhook["url"] = base + path
	}
	_ = unstructured.SetNestedMap(obj.Object, hooks, "spec", "hooks")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// applier server-side-applies YAML files of any kinds.
type applier struct {
	client    dynamic.Interface
	resources *discovery.ResourceMap
}

func newApplier(cp *controlplane.ControlPlane) (*applier, error) {
	client, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	return &applier{client: client, resources: discovery.NewResourceMap(kube.Discovery(), discovery.Options{MinRefreshInterval: 200 * time.Millisecond})}, nil
}

func (a *applier) applyFile(ctx context.Context, path string, edit func(*unstructured.Unstructured)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		edit(obj)
		if err := a.apply(ctx, obj); err != nil {
			return fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), path, err)
		}
	}
}

// apply waits for the object's kind to be served (a CRD applied just before
// takes a moment) and server-side-applies it.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	var res *discovery.Resource
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		res, err = a.resources.GetKind(ctx, obj.GetAPIVersion(), obj.GetKind())
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kind %s %s not served: %w", obj.GetAPIVersion(), obj.GetKind(), err)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	client := a.client.Resource(res.GroupVersionResource())
	var ri dynamic.ResourceInterface = client
	if res.Namespaced {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = client.Namespace(ns)
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "metactl-dev", Force: ptr.To(true)})
	return err
}

// serveExplain serves `metactl explain`'s endpoint (explain.Path) for m,
// and `metactl record fetch`'s (hookrecord.Path) for recorder, without the
// guard of metactl run (internal/debugauth: a single-user local cluster,
// reachable from this machine only), on a free
// loopback port and records its address in the kubeconfig's current
// context (explain.RecordEndpoint), where both look for it. The returned
// func stops the server.
func serveExplain(m *manager.Manager, recorder *hookrecord.Recorder, kubeconfig string) (func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for metactl explain: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(explain.Path, explain.Handler(m))
	mux.Handle(hookrecord.Path, hookrecord.Handler(recorder))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if err := explain.RecordEndpoint(kubeconfig, "http://"+ln.Addr().String()); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("recording the explain endpoint in %s: %w", kubeconfig, err)
	}
	return func() { _ = srv.Close() }, nil
}
