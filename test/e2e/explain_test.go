package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/testenv"
)

// explainHook answers HelloWorld "broken" with 500 and every other one
// with a ConfigMap child NAME-greeting.
func explainHook(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Parent.Metadata.Name == "broken" {
			http.Error(w, "the greeting service is down", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": map[string]any{"ok": true},
			"children": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": req.Parent.Metadata.Name + "-greeting"},
				"data":     map[string]any{"greeting": "hello"},
			}},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

// podIP returns an address of this machine that the API server's Pod
// proxy accepts (not loopback, not link-local), or "" when there is none.
func podIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// explainRun runs the built metactl binary with args and returns its
// combined output and error.
func explainRun(metactl string, args ...string) (string, error) {
	out, err := exec.Command(metactl, args...).CombinedOutput()
	return string(out), err
}

// TestExplain runs `metactl explain`, the binary, against a running
// `metactl run` with a CompositeController of HelloWorlds labelled
// test=explain: for a parent whose hook fails (the output names the
// controller, the error, the attempt and the next attempt, the failed
// hook calls), a healthy one (Synced, its syncs, its child), in the
// human, JSON and YAML formats; a parent the controller does not select;
// an unknown resource, an unknown object and an unreachable metactl (each
// exits non-zero, saying what to check); the same binary as the kubectl
// plugin kubectl-metactl run by the real kubectl; and the path through
// the API server's Pod proxy, to a Pod object whose IP is this machine's.
func TestExplain(t *testing.T) {
	ns := env.CreateNamespace(t)
	metactl := testenv.BuildMetactl(t)
	// Open what the test executes, so that `go test` caches no result of
	// an older binary (a file this new makes the result uncacheable).
	if f, err := os.Open(metactl); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	// metactl listens on every interface, so that the API server's Pod
	// proxy reaches it at this machine's address too.
	port := testenv.FreePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--debug-auth=false", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", fmt.Sprintf(":%d", port), "--health-addr", "127.0.0.1:0", "--workers", "2", "--cache-resync", "0", "--max-retry-delay", "2s")
	waitListening(t, p, port)

	hook := explainHook(t)
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	controllerName := "explain-" + ns
	manifest := writeManifests(t, helloWorldController{name: controllerName, label: "explain", hookURL: hook.URL}.yaml())
	kubectl(t, "apply", "-f", manifest)
	deleteOnCleanup(t, manifest)
	parents := filepath.Join(t.TempDir(), "parents.yaml")
	var docs []string
	for name, labels := range map[string]string{"healthy": "{test: explain}", "broken": "{test: explain}", "unlabelled": "{}"} {
		docs = append(docs, fmt.Sprintf("apiVersion: example.metactl.io/v1\nkind: HelloWorld\nmetadata:\n  name: %s\n  labels: %s\nspec:\n  who: explain\n", name, labels))
	}
	if err := os.WriteFile(parents, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "HelloWorlds created (the CRD served)", func(ctx context.Context) (bool, error) {
		_, err := env.Kubectl(ctx, "apply", "-n", ns, "-f", parents)
		return err == nil, err
	})
	deleteOnCleanup(t, parents, "-n", ns)
	waitFor(t, settle, configmapsGVR, ns, "healthy-greeting", "the healthy parent's child", func(u *unstructured.Unstructured) bool { return u != nil })

	explainArgs := func(target string, more ...string) []string {
		return append([]string{"explain", target, "-n", ns, "--kubeconfig", env.KubeconfigPath, "--endpoint", endpoint}, more...)
	}
	controllerLine := "Controller:   CompositeController " + controllerName + " (parent)"

	// The failing parent, for people.
	var out string
	testenv.Eventually(t, settle, "explain shows the broken parent failing, attempt 2 or more", func(context.Context) (bool, error) {
		var err error
		out, err = explainRun(metactl, explainArgs("helloworlds/broken")...)
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return strings.Contains(out, "State:        Failing:") && !strings.Contains(out, "attempt 1, ") && strings.Contains(out, ", attempt "), nil
	})
	for _, want := range []string{controllerLine, "the greeting service is down", "Answered by:  metactl ", ", next attempt ",
		"Recent syncs (newest first):", "hook sync: 500 in "} {
		if !strings.Contains(out, want) {
			t.Errorf("explain helloworlds/broken lacks %q:\n%s", want, out)
		}
	}

	// The healthy parent, for people, by its kind and group.
	out, err := explainRun(metactl, explainArgs("HelloWorld.example.metactl.io/healthy")...)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{controllerLine, "State:        Synced\n", "Recent syncs (newest first):", "hook sync: 200 in ",
		"create child configmaps/" + ns + "/healthy-greeting", "configmaps  " + ns + "/healthy-greeting  present"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain HelloWorld.example.metactl.io/healthy lacks %q:\n%s", want, out)
		}
	}

	// JSON and YAML: the answer type.
	for _, format := range []string{"json", "yaml"} {
		for _, name := range []string{"broken", "healthy"} {
			out, err := exec.Command(metactl, explainArgs("helloworld/"+name, "-o", format)...).Output()
			if err != nil {
				t.Fatalf("-o %s %s: %v", format, name, err)
			}
			var a explain.Answer
			if err := yaml.UnmarshalStrict(out, &a); err != nil { // YAML is a superset of JSON
				t.Fatalf("-o %s %s: %v\n%s", format, name, err, out)
			}
			if format == "json" && !json.Valid(out) {
				t.Errorf("-o json printed no JSON:\n%s", out)
			}
			if len(a.Controllers) != 1 || a.Controllers[0].Name != controllerName || a.Controllers[0].Role != explain.RoleParent || !a.Process.Leading {
				t.Fatalf("-o %s %s: %+v, want one controller %s", format, name, a, controllerName)
			}
			s := a.Controllers[0].State
			switch name {
			case "broken":
				if s.Phase != explain.PhaseFailing || s.Attempt < 1 || s.NextAttempt.IsZero() || !strings.Contains(s.Error, "the greeting service is down") {
					t.Errorf("-o %s broken: state %+v", format, s)
				}
			case "healthy":
				if s.Phase != explain.PhaseSynced || len(a.Controllers[0].Syncs) == 0 || len(a.Controllers[0].Dependents) != 1 || a.Controllers[0].Dependents[0].Name != "healthy-greeting" {
					t.Errorf("-o %s healthy: %+v", format, a.Controllers[0])
				}
			}
		}
	}

	// Not selected: says so, and which selector; not an error.
	out, err = explainRun(metactl, explainArgs("hello/unlabelled")...)
	if err != nil || !strings.Contains(out, "none: no controller selects it") ||
		!strings.Contains(out, "CompositeController "+controllerName+" syncs this resource but does not select it: spec.parentResource.labelSelector test=explain") {
		t.Errorf("explain of an unselected parent: %v\n%s", err, out)
	}

	// A child: no controller syncs it; its owner is named, with the
	// command that explains it.
	out, err = explainRun(metactl, explainArgs("cm/healthy-greeting")...)
	if err != nil || !strings.Contains(out, "Owner:        HelloWorld healthy controls it: try metactl explain helloworld.example.metactl.io/healthy -n "+ns) {
		t.Errorf("explain of a child: %v\n%s", err, out)
	}

	// Errors: non-zero, saying what to check.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{explainArgs("nosuchthings/x"), "kubectl api-resources"},
		{explainArgs("helloworlds/nope"), "helloworlds.example.metactl.io " + ns + "/nope not found: check the name and the namespace"},
		{[]string{"explain", "helloworlds/healthy", "-n", ns, "--kubeconfig", env.KubeconfigPath, "--endpoint", "http://127.0.0.1:1"}, "check that metactl runs"},
		{explainArgs("helloworlds/healthy", "-o", "wide"), `--output "wide": want json or yaml`},
	} {
		out, err := explainRun(metactl, tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("metactl %s: %v, want an error saying %q:\n%s", strings.Join(tc.args, " "), err, tc.want, out)
		}
	}

	// The kubectl plugin: the same binary as kubectl-metactl on $PATH,
	// run by the real kubectl, which passes the flags through.
	bin := t.TempDir()
	if err := os.Symlink(metactl, filepath.Join(bin, "kubectl-metactl")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(env.AssetsDir, "kubectl"), append([]string{"metactl"}, explainArgs("helloworlds/healthy")...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if plugin, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(plugin), controllerLine) {
		t.Errorf("kubectl metactl explain: %v\n%s", err, plugin)
	}
	cmd = exec.Command(filepath.Join(env.AssetsDir, "kubectl"), "metactl", "explain", "--help")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if help, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(help), "kubectl metactl explain RESOURCE/NAME") {
		t.Errorf("kubectl metactl explain --help does not say kubectl metactl: %v\n%s", err, help)
	}

	// Through the API server's Pod proxy: a Pod object in a namespace of
	// its own, labelled as the Deployment's Pods are, whose IP is this
	// machine's, where metactl listens; the API server dials it.
	podNS, podName := metactlPod(t)
	ctx := context.Background()
	out, err = explainRun(metactl, "explain", "helloworlds/broken", "-n", ns, "--kubeconfig", env.KubeconfigPath,
		"--metactl-namespace", podNS, "--metactl-port", fmt.Sprint(port))
	if err != nil || !strings.Contains(out, controllerLine) || !strings.Contains(out, "State:        Failing:") {
		t.Errorf("explain through the Pod proxy: %v\n%s", err, out)
	}
	// A Pod Running but not Ready (a leader whose readiness probe fails)
	// is still asked; one not Running is not, and then there is no one
	// to ask.
	setPodStatus := func(phase corev1.PodPhase, ready corev1.ConditionStatus) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current, err := env.Kube.CoreV1().Pods(podNS).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current.Status.Phase = phase
			current.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
			_, err = env.Kube.CoreV1().Pods(podNS).UpdateStatus(ctx, current, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	setPodStatus(corev1.PodRunning, corev1.ConditionFalse)
	out, err = explainRun(metactl, "explain", "helloworlds/broken", "-n", ns, "--kubeconfig", env.KubeconfigPath,
		"--metactl-namespace", podNS, "--metactl-port", fmt.Sprint(port))
	if err != nil || !strings.Contains(out, controllerLine) {
		t.Errorf("explain through a Pod Running but not Ready: %v\n%s", err, out)
	}
	setPodStatus(corev1.PodFailed, corev1.ConditionFalse)
	out, err = explainRun(metactl, "explain", "helloworlds/broken", "-n", ns, "--kubeconfig", env.KubeconfigPath,
		"--metactl-namespace", podNS, "--metactl-port", fmt.Sprint(port))
	if err == nil || !strings.Contains(out, "no Running metactl Pod in namespace "+podNS) {
		t.Errorf("explain with no Running Pod: %v\n%s", err, out)
	}
}

// TestExplainOff: with --explain=false, metactl serves no
// /debug/explain on its metrics address, and still its /metrics.
func TestExplainOff(t *testing.T) {
	metactl := testenv.BuildMetactl(t)
	if f, err := os.Open(metactl); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	port := testenv.FreePort(t)
	p := testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath, "--explain=false",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--health-addr", "127.0.0.1:0", "--workers", "2")
	waitListening(t, p, port)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for path, want := range map[string]int{
		explain.Path + "?resource=helloworlds&name=x": http.StatusNotFound,
		"/metrics": http.StatusOK,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %s, want %d", path, resp.Status, want)
		}
	}
}
