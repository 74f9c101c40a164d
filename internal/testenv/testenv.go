package testenv

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/controlplane"
)

// Options configure a control plane.
type Options struct {
	// GarbageCollector also starts kube-controller-manager running the
	// garbage collector and namespace controllers, for tests of cascading
	// deletion.
	GarbageCollector bool
	// ExtraCRDPaths are files or folders of further CRDs to install, such as
	// a test's parent resource; metactl's own CRDs are always installed.
	ExtraCRDPaths []string
	// APIServerFlags are further kube-apiserver flags (see
	// controlplane.Options).
	APIServerFlags map[string]string
	// RemoveAtExit are folders Main removes once the control plane has
	// stopped (those of APIServerFlags' files, say).
	RemoveAtExit []string
}

// Environment is a running control plane with clients for it. Its fields
// are safe for concurrent use by tests.
type Environment struct {
	*controlplane.ControlPlane
	// Dynamic and Kube are clients built from Config.
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
}

// Start starts a control plane (see internal/controlplane) and builds
// clients for it. On error nothing is left running.
func Start(opts Options) (*Environment, error) {
	cp, err := controlplane.Start(controlplane.Options{GarbageCollector: opts.GarbageCollector, ExtraCRDPaths: opts.ExtraCRDPaths, APIServerFlags: opts.APIServerFlags})
	if err != nil {
		return nil, err
	}
	e := &Environment{ControlPlane: cp}
	// Tests make many requests quickly; client-side throttling would only
	// slow them down.
	cp.Config.QPS, cp.Config.Burst = 500, 1000
	if e.Dynamic, err = dynamic.NewForConfig(cp.Config); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	if e.Kube, err = kubernetes.NewForConfig(cp.Config); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return e, nil
}

// RepoRoot returns the root of the metactl repository.
func RepoRoot() (string, error) { return controlplane.RepoRoot() }

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

// ImpersonatingKubeconfig writes a copy of the control plane's kubeconfig,
// in a folder of t's, whose users act as user (the API server adds the
// user's groups), for a metactl or kubectl process that must run with
// user's rights; it returns its path.
func (e *Environment) ImpersonatingKubeconfig(t testing.TB, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(e.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AuthInfos) == 0 {
		t.Fatalf("%s has no users", e.KubeconfigPath)
	}
	for _, u := range cfg.AuthInfos {
		u.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Eventually polls condition every 100ms until it returns true or timeout
// passes; then the test fails with what and the condition's last error. An
// error does not end the wait (a NotFound may be the state being waited
// out); a condition that sees the wait is hopeless calls t.Fatal itself.
// It is the package's one way to wait: tests never sleep.
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
		removeAll(opts.RemoveAtExit)
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
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	removeAll(opts.RemoveAtExit)
	os.Exit(code)
}

func removeAll(dirs []string) {
	for _, dir := range dirs {
		_ = os.RemoveAll(dir)
	}
}

// mkdirTemp makes a temporary folder that lives as long as the test binary.
func mkdirTemp() (string, error) { return os.MkdirTemp("", "metactl-test-") }
