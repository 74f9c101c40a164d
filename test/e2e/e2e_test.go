package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/testenv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var (
	env    *testenv.Environment
	binary string
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{GarbageCollector: true}, &env)
}

func repo(t *testing.T, parts ...string) string {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// buildMetactl builds the binary once per test binary.
func buildMetactl(t *testing.T) string {
	t.Helper()
	if binary != "" {
		return binary
	}
	out := filepath.Join(t.TempDir(), "metactl")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/metactl")
	cmd.Dir = repo(t)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	binary = out
	return out
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// process is a child process whose output is kept for the test log.
type process struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

func start(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(name, args...), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, lastLines(p.out.String(), 40))
		}
	})
	return p
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// applyExample applies an example's YAML file, with every webhook pointed
// at hookURL, as `metactl dev` does.
func applyExample(t *testing.T, file, hookURL string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, doc := range strings.Split(string(data), "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		if kind := obj["kind"]; kind == "CompositeController" || kind == "DecoratorController" {
			hooks, _, _ := unstructured.NestedMap(obj, "spec", "hooks")
			for name, h := range hooks {
				webhook := h.(map[string]any)["webhook"].(map[string]any)
				path, _ := webhook["path"].(string)
				if path == "" {
					path = "/" + name
				}
				delete(webhook, "service")
				delete(webhook, "path")
				webhook["url"] = hookURL + path
			}
			_ = unstructured.SetNestedMap(obj, hooks, "spec", "hooks")
		}
		out, _ := yaml.Marshal(obj)
		docs = append(docs, string(out))
	}
	edited := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(edited, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(context.Background(), "apply", "-f", edited); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func waitFor(t *testing.T, timeout time.Duration, gvr schema.GroupVersionResource, ns, name, what string, check func(*unstructured.Unstructured) bool) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("%s %s/%s: %s", gvr.Resource, ns, name, what), func(ctx context.Context) (bool, error) {
		obj, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return check(nil), nil
		}
		if err != nil {
			return false, err
		}
		return check(obj), nil
	})
}

// TestHelloWorldPython runs metactl run and the Python hello-world hook as
// processes, drives the example with kubectl, and stops metactl with
// SIGTERM, which must end it cleanly with exit code 0.
func TestHelloWorldPython(t *testing.T) {
	began := time.Now()
	metactl := buildMetactl(t)
	dir := repo(t, "examples", "python", "hello-world")
	port := freePort(t)
	start(t, "python3", filepath.Join(dir, "hook.py"), "--port", fmt.Sprint(port))
	run := start(t, metactl, "run", "--kubeconfig", env.KubeconfigPath, "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--workers", "2")

	applyExample(t, filepath.Join(dir, "crd.yaml"), "")
	applyExample(t, filepath.Join(dir, "controller.yaml"), fmt.Sprintf("http://127.0.0.1:%d", port))
	ns := env.CreateNamespace(t)
	if out, err := env.Kubectl(context.Background(), "apply", "-n", ns, "-f", filepath.Join(dir, "sample.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	helloworlds := schema.GroupVersionResource{Group: "example.metactl.io", Version: "v1", Resource: "helloworlds"}
	configmaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	greeting := func(want string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			if o == nil {
				return false
			}
			g, _, _ := unstructured.NestedString(o.Object, "data", "greeting")
			return g == want
		}
	}
	t.Logf("%v: applied", time.Since(began))
	waitFor(t, time.Minute, configmaps, ns, "your-name-greeting", "greets World", greeting("Hello, World!"))
	t.Logf("%v: greets World", time.Since(began))
	waitFor(t, time.Minute, helloworlds, ns, "your-name", "status greets World", func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		g, _, _ := unstructured.NestedString(o.Object, "status", "greeting")
		return g == "Hello, World!"
	})

	if out, err := env.Kubectl(context.Background(), "patch", "-n", ns, "helloworld", "your-name", "--type", "merge", "-p", `{"spec":{"who":"metactl"}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%v: patched", time.Since(began))
	waitFor(t, time.Minute, configmaps, ns, "your-name-greeting", "greets metactl", greeting("Hello, metactl!"))
	t.Logf("%v: greets metactl", time.Since(began))

	out, err := env.Kubectl(context.Background(), "get", "cc", "hello-world")
	if err != nil || !strings.Contains(out, "True") {
		t.Errorf("kubectl get cc hello-world: want READY True, got %v\n%s", err, out)
	}

	t.Logf("%v: sending SIGTERM", time.Since(began))
	if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-run.done:
		run.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("metactl run after SIGTERM: %v, want exit code 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("metactl run did not stop within 30s of SIGTERM")
	}
	if !strings.Contains(run.out.String(), "Stopped") {
		t.Errorf("metactl run did not log its orderly stop")
	}
}
