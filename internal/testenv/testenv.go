package testenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure a control plane.
type Options struct {
	// GarbageCollector also starts kube-controller-manager running the
	// garbage collector and namespace controllers, for tests of cascading
	// deletion. It adds about a second to the start.
	GarbageCollector bool
	// ExtraCRDPaths are files or folders of further CRDs to install, such as
	// a test's parent resource; metactl's own CRDs are always installed.
	ExtraCRDPaths []string
}

// Environment is a running control plane. Its fields are safe for
// concurrent use by tests.
type Environment struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Dynamic and Kube are clients built from Config.
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	// KubeconfigPath is a kubeconfig file for Config, for child processes
	// such as kubectl or metactl itself.
	KubeconfigPath string
	// AssetsDir holds the control-plane binaries.
	AssetsDir string

	env      *envtest.Environment
	dir      string
	kcm      *exec.Cmd
	kcmDone  chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd and kube-apiserver, installs metactl's CRDs (and
// Options.ExtraCRDPaths) and waits until they are served. On error nothing
// is left running.
func Start(opts Options) (_ *Environment, err error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metactl-testenv-")
	if err != nil {
		return nil, err
	}
	e := &Environment{AssetsDir: assets, dir: dir}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()

	e.env = &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        append([]string{filepath.Join(root, "manifests", "crds")}, opts.ExtraCRDPaths...),
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Loopback only, and quiet: the API server logs at -v 0 to its own pipe.
	e.env.ControlPlane.GetAPIServer().Configure().Set("bind-address", "127.0.0.1")
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	e.Config.QPS, e.Config.Burst = 500, 1000

	e.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err = os.WriteFile(e.KubeconfigPath, e.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return nil, err
	}
	if e.Kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return nil, err
	}
	if opts.GarbageCollector {
		if err = e.startControllerManager(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Environment) startControllerManager() error {
	logFile, err := os.Create(filepath.Join(e.dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(e.AssetsDir, "kube-controller-manager"),
		"--kubeconfig="+e.KubeconfigPath,
		"--controllers=garbagecollector,namespace",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--concurrent-gc-syncs=20",
		"--v=1",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with this process even if it dies without calling Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	e.kcm, e.kcmDone = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(e.kcmDone)
	}()
	return nil
}

// Stop stops every process of the control plane and removes its temporary
// files. It is safe to call more than once and from several goroutines.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		var errs []error
		if e.kcm != nil {
			_ = e.kcm.Process.Signal(syscall.SIGTERM)
			select {
			case <-e.kcmDone:
			case <-time.After(10 * time.Second):
				_ = e.kcm.Process.Kill()
				<-e.kcmDone
			}
		}
		if e.env != nil {
			if err := e.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
			}
		}
		if e.dir != "" {
			errs = append(errs, os.RemoveAll(e.dir))
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// CreateNamespace creates a namespace with a fresh name for one test and
// deletes it when the test ends.
func (e *Environment) CreateNamespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := e.Kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Kubectl runs the kubectl built with the control plane against it and
// returns its standard output; a failure carries its standard error.
func (e *Environment) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.AssetsDir, "kubectl"), append([]string{"--kubeconfig=" + e.KubeconfigPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Eventually polls condition every 100ms until it returns true, returns an
// error, or timeout passes; the test fails in the latter two cases with
// what. It is the package's one way to wait: tests never sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, condition func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := condition(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		if lastErr != nil {
			t.Fatalf("timed out after %v waiting for %s; last error: %v", timeout, what, lastErr)
		}
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Main runs a test package against one control plane: it starts the
// environment, stores it in *env, runs the tests and stops the environment on
// every path out: a normal end, SIGINT or SIGTERM, and one minute before the
// go test -timeout fires (after which the test binary would die without
// running deferred calls). Use it as the whole body of TestMain:
//
//	var env *testenv.Environment
//
//	func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }
func Main(m *testing.M, opts Options, env **Environment) {
	flag.Parse()
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*env = e

	stopAndExit := func(why string) {
		fmt.Fprintf(os.Stderr, "testenv: %s; stopping the control plane\n", why)
		_ = e.Stop()
		os.Exit(1)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		stopAndExit("received " + sig.String())
	}()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			timer := time.AfterFunc(d-time.Minute, func() {
				stopAndExit(fmt.Sprintf("the test binary is about to reach its -timeout of %v", d))
			})
			defer timer.Stop()
		}
	}

	code := func() int {
		defer func() {
			if r := recover(); r != nil {
				_ = e.Stop()
				panic(r)
			}
		}()
		return m.Run()
	}()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
