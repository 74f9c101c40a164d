package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metactl/metactl/internal/testenv"
)

// runHookTest runs the built `metactl hook test` with args and returns its
// output and exit code.
func runHookTest(t *testing.T, args ...string) (string, int) {
	t.Helper()
	statSources(t) // a change to metactl's sources runs these tests again
	metactl := testenv.BuildMetactl(t)
	cmd := exec.Command(metactl, append([]string{"hook", "test"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=") // no kubeconfig unless given
	out, err := cmd.CombinedOutput()
	if err == nil {
		return string(out), 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(out), ee.ExitCode()
	}
	t.Fatalf("running metactl hook test: %v\n%s", err, out)
	return "", 0
}

// installCRD makes sure the API server serves the CRD of the example in
// dir, when it has one: with --kubeconfig, hook test resolves the
// controller's resources through the cluster's discovery, and a test must
// not rely on another test having left the CRD installed (TestMain
// installs it, but a test before this one may have deleted it). It
// applies crd.yaml, waits until the CRD is Established, and deletes it
// when the test ends only if it was not there before: a CRD installed
// with the control plane is left for the tests after this one, whose
// garbage collection relies on kube-controller-manager having known it
// from the start (see TestMain).
func installCRD(t *testing.T, dir string) {
	t.Helper()
	crd := filepath.Join(dir, "crd.yaml")
	if !fileExists(crd) {
		return
	}
	existed := strings.TrimSpace(kubectl(t, "get", "--ignore-not-found", "-o", "name", "-f", crd)) != ""
	kubectl(t, "apply", "-f", crd)
	if !existed {
		deleteOnCleanup(t, crd)
	}
	kubectl(t, "wait", "--for=condition=Established", "--timeout=30s", "-f", crd)
}

// TestHookTestHelloWorld: the built binary finds nothing wrong with the
// hello-world example's hook (a real Python process), with the cluster's
// discovery and offline, and says so with exit code 0.
func TestHookTestHelloWorld(t *testing.T) {
	dir := repo(t, "examples", "python", "hello-world")
	installCRD(t, dir)
	_, url := startHook(t, "python", dir)
	common := []string{"--controller", filepath.Join(dir, "controller.yaml"), "--parent", filepath.Join(dir, "sample.yaml"), "--hook-url", url}

	out, code := runHookTest(t, append(common, "--kubeconfig", env.KubeconfigPath, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, out)
	}
	var report struct {
		Resources string `json:"resources"`
		Requests  []struct {
			Name string `json:"name"`
			Sent int    `json:"sent"`
			OK   bool   `json:"ok"`
		} `json:"requests"`
		Findings []any `json:"findings"`
		Errors   int   `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if report.Resources != "cluster" || report.Errors != 0 || len(report.Findings) != 0 {
		t.Errorf("report %+v, want resources from the cluster and no findings", report)
	}
	sent := map[string]bool{}
	for _, q := range report.Requests {
		if q.Sent > 0 {
			sent[q.Name] = q.OK
		}
	}
	for _, name := range []string{"no-children", "own-children-1", "child-deleting"} {
		if ok, was := sent[name]; !was || !ok {
			t.Errorf("request %s: sent %v, ok %v", name, was, ok)
		}
	}

	out, code = runHookTest(t, append(common, "--offline", "--crd", filepath.Join(dir, "crd.yaml"))...)
	if code != 0 || !strings.Contains(out, "0 errors, 0 warnings") {
		t.Fatalf("offline: exit code %d, want 0 and no findings:\n%s", code, out)
	}
}

// TestHookTestBrokenHook: the hello-world hook changed to put the time in
// its status answers differently to the same request: exit code 2, and
// the finding names the field. A hook that nothing answers at is exit 1.
func TestHookTestBrokenHook(t *testing.T) {
	dir := repo(t, "examples", "python", "hello-world")
	src, err := os.ReadFile(filepath.Join(dir, "hook.py"))
	if err != nil {
		t.Fatal(err)
	}
	const good = `"configMaps": len(children),`
	if !strings.Contains(string(src), good) {
		t.Fatalf("hook.py no longer has %s", good)
	}
	broken := strings.Replace(string(src), good, good+` "syncedAt": __import__("time").time(),`, 1)
	brokenDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(brokenDir, "hook.py"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	_, url := startHook(t, "python", brokenDir)
	args := []string{"--controller", filepath.Join(dir, "controller.yaml"), "--parent", filepath.Join(dir, "sample.yaml"),
		"--offline", "--crd", filepath.Join(dir, "crd.yaml")}

	out, code := runHookTest(t, append(args, "--hook-url", url)...)
	if code != 2 {
		t.Fatalf("exit code %d, want 2:\n%s", code, out)
	}
	if !strings.Contains(out, "error: sync hook [nondeterministic]") || !strings.Contains(out, ".status.syncedAt") {
		t.Errorf("no nondeterministic finding naming .status.syncedAt:\n%s", out)
	}

	// Nothing listens at the port of a stopped server.
	port := testenv.FreePort(t)
	out, code = runHookTest(t, append(args, "--hook-url", fmt.Sprintf("http://127.0.0.1:%d", port))...)
	if code != 1 || !strings.Contains(out, "no request reached the hook") {
		t.Errorf("unreachable hook: exit code %d, want 1:\n%s", code, out)
	}
	// A service hook without --hook-url.
	out, code = runHookTest(t, args...)
	if code != 1 || !strings.Contains(out, "--hook-url") {
		t.Errorf("service hook: exit code %d, want 1 and a word on --hook-url:\n%s", code, out)
	}
}

// TestHookTestExamples: every example's hook passes `metactl hook test`,
// its resources resolved by the cluster, its sample as the parent.
func TestHookTestExamples(t *testing.T) {
	examples, err := filepath.Glob(repo(t, "examples", "*", "*", "controller.yaml"))
	if err != nil || len(examples) < 8 {
		t.Fatalf("examples: %v %v", examples, err)
	}
	for _, controller := range examples {
		dir := filepath.Dir(controller)
		t.Run(filepath.Base(filepath.Dir(dir))+"/"+filepath.Base(dir), func(t *testing.T) {
			installCRD(t, dir)
			_, url := startHook(t, filepath.Base(filepath.Dir(dir)), dir)
			out, code := runHookTest(t, "--controller", controller, "--parent", filepath.Join(dir, "sample.yaml"),
				"--hook-url", url, "--kubeconfig", env.KubeconfigPath)
			if code != 0 || !strings.Contains(out, "0 errors, 0 warnings") || !strings.Contains(out, "(resources: cluster)") {
				t.Fatalf("exit code %d, want 0 without findings:\n%s", code, out)
			}
		})
	}
}
