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
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/controlplane"
	"github.com/metactl/metactl/test/internal/metactlrun"
)

//go:embed crd.yaml
var crdYAML []byte

var (
	parentGVR = schema.GroupVersionResource{Group: "soak.metactl.io", Version: "v1", Resource: "soakparents"}
	ccGVR     = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
)

const (
	namespace = "soak"
	ccName    = "soak"
	// childrenPerParent is the number of ConfigMaps the hook asks for.
	childrenPerParent = 3
)

type options struct {
	duration       time.Duration
	parents        int
	failRate       float64
	opsPerSecond   float64
	sampleEvery    time.Duration
	convergeWithin time.Duration
	metactlBin     string
	logPath        string
	heapProfiles   bool
}

func parseFlags() (options, error) {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the churn runs (sampling throughout)")
	flag.IntVar(&o.parents, "parents", 100, "parents in the controller's scope, kept near this number while they are created and deleted")
	flag.Float64Var(&o.failRate, "fail-rate", 0.2, "share of hook calls that fail (500, a timeout, invalid JSON) or answer slowly, in equal parts")
	flag.Float64Var(&o.opsPerSecond, "ops", 10, "churn operations per second (parent create, update, delete; child edit or delete; out-of-scope parents)")
	flag.DurationVar(&o.sampleEvery, "sample-every", 10*time.Second, "time between samples of metactl's RSS, goroutines and file descriptors")
	flag.DurationVar(&o.convergeWithin, "converge-within", 3*time.Minute, "after the churn, with the hook healthy, the longest wait for everything to converge (metactl's backoff is capped at 2 minutes)")
	flag.StringVar(&o.metactlBin, "metactl", "", "metactl binary to run (default: go build ./cmd/metactl into a temporary folder)")
	flag.StringVar(&o.logPath, "log", "", "metactl's log file (default: a file in the temporary folder, kept)")
	flag.BoolVar(&o.heapProfiles, "heap-profiles", true, "run metactl with --pprof-addr on loopback and save its heap profile (after a GC) when the churn starts and once converged, next to its log, to see what grew")
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if o.parents < 1 || o.duration <= 0 || o.opsPerSecond <= 0 || o.sampleEvery <= 0 || o.failRate < 0 || o.failRate > 1 {
		return o, errors.New("-parents, -duration, -ops and -sample-every must be positive, -fail-rate between 0 and 1")
	}
	return o, nil
}

func main() {
	// etcd and kube-apiserver die with this process, however it dies.
	controlplane.RunStandIn()
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	// hack/cleanup-testenv.sh leaves alone control planes whose owner is
	// named like a test binary.
	_ = os.WriteFile("/proc/self/comm", []byte("soak.test"), 0)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	passed, err := run(ctx, o)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case err != nil && interrupted:
		fmt.Fprintln(os.Stderr, "soak: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	case !passed:
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) (bool, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "metactl-soak-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	bin := o.metactlBin
	if bin == "" {
		bin = filepath.Join(tmp, "metactl")
		logf("building metactl from %s", root)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/metactl")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return false, fmt.Errorf("go build ./cmd/metactl: %w\n%s", err, out)
		}
	}
	if o.logPath == "" {
		o.logPath = filepath.Join(os.TempDir(), fmt.Sprintf("metactl-soak-%d.log", os.Getpid()))
	}

	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return false, fmt.Errorf("decoding crd.yaml: %w", err)
	}
	logf("starting the control plane (etcd, kube-apiserver, kube-controller-manager for garbage collection)")
	cp, err := controlplane.Start(controlplane.Options{GarbageCollector: true, TieToThisProcess: true,
		ExtraCRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	if err != nil {
		return false, err
	}
	defer func() {
		logf("stopping the control plane")
		if err := cp.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "metactl-soak"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return false, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false, err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return false, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}

	hook, err := startHook(0)
	if err != nil {
		return false, err
	}
	defer hook.stop()
	m, err := startMetactl(ctx, bin, cp.KubeconfigPath, o.logPath, o.heapProfiles)
	if err != nil {
		return false, err
	}
	defer m.Stop()
	if err := installController(ctx, dyn, hook.url, m); err != nil {
		return false, err
	}

	s := &soak{o: o, dyn: dyn, kube: kube, hook: hook, metactl: m, state: map[string]*parentState{}}
	// The warm-up: -parents parents, converged with a healthy hook, before
	// the first sample counts.
	logf("warm-up: creating %d parents", o.parents)
	for range o.parents {
		if err := s.createParent(ctx, true); err != nil {
			return false, err
		}
	}
	if p, err := s.waitConverged(ctx, o.convergeWithin); err != nil {
		return false, err
	} else if p.total() > 0 {
		return false, fmt.Errorf("the warm-up's parents did not converge within %v: %v", o.convergeWithin, p)
	}
	logf("warm-up converged; churn for %v at %.0f operations/s, hook failure rate %.2f", o.duration, o.opsPerSecond, o.failRate)

	m.saveHeapProfile(ctx, "start")
	hook.setFailRate(o.failRate)
	if err := s.churnAndSample(ctx); err != nil {
		return false, err
	}
	hook.setFailRate(0)
	logf("churn over; the hook is healthy again: waiting up to %v for convergence", o.convergeWithin)
	began := time.Now()
	left, err := s.waitConverged(ctx, o.convergeWithin)
	if err != nil {
		return false, err
	}
	s.convergedIn = time.Since(began)
	// The last sample, once everything is quiet.
	if err := s.sample(ctx); err != nil {
		return false, err
	}
	m.saveHeapProfile(ctx, "end")
	return s.report(left), nil
}

// metactlProcess is `metactl run` (see metactlrun), and the heap
// profiles the soak saved of it.
type metactlProcess struct {
	*metactlrun.Process
	// heapProfiles are the files saveHeapProfile wrote.
	heapProfiles []string
}

func startMetactl(ctx context.Context, bin, kubeconfig, logPath string, pprof bool) (*metactlProcess, error) {
	p, err := metactlrun.Start(ctx, metactlrun.Options{Bin: bin, Kubeconfig: kubeconfig, LogPath: logPath, Pprof: pprof, Logf: logf})
	if err != nil {
		return nil, err
	}
	return &metactlProcess{Process: p}, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// saveHeapProfile saves metactl's heap profile, after a garbage
// collection, as <log>.heap-<name>.pb.gz; a failure is logged, not fatal.
func (p *metactlProcess) saveHeapProfile(ctx context.Context, name string) {
	if p.PprofURL == "" {
		return
	}
	path := strings.TrimSuffix(p.Log.Name(), ".log") + ".heap-" + name + ".pb.gz"
	body, err := metactlrun.Get(ctx, p.PprofURL+"/heap?gc=1")
	if err == nil {
		err = os.WriteFile(path, body, 0o644)
	}
	if err != nil {
		logf("saving metactl's heap profile: %v", err)
		return
	}
	p.heapProfiles = append(p.heapProfiles, path)
}

// installController creates the CompositeController, whose scope is the
// parents labelled soak=in, and waits until metactl reports it Ready.
func installController(ctx context.Context, dyn dynamic.Interface, hookURL string, m *metactlProcess) error {
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": ccName},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource": map[string]any{
				"apiVersion":    parentGVR.GroupVersion().String(),
				"resource":      parentGVR.Resource,
				"labelSelector": map[string]any{"matchLabels": map[string]any{"soak": "in"}},
			},
			"childResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps",
				"updateStrategy": map[string]any{"method": "InPlace"},
			}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{
				"url": hookURL + "/sync", "timeout": hookTimeout.String(),
			}}},
		},
	}}
	if _, err := dyn.Resource(ccGVR).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the CompositeController: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := dyn.Resource(ccGVR).Get(ctx, ccName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if c, _ := c.(map[string]any); c["type"] == "Ready" && c["status"] == "True" {
				return nil
			}
		}
		if err := m.Exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CompositeController %s not Ready within 2 minutes: conditions %v", ccName, conds)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}
