package plan

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

var (
	env *testenv.Environment
	// auditLog is the API server's audit log of every write request.
	auditLog string
)

// auditPolicy logs the metadata (URI with its query, verb, user agent,
// response code) of every request that may write.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "metactl-plan-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	auditLog = filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{
		ExtraCRDPaths:  []string{filepath.Join(root, "examples", "python", "hello-world", "crd.yaml")},
		APIServerFlags: map[string]string{"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-mode": "blocking"},
		RemoveAtExit:   []string{dir},
	}, &env)
}

var (
	helloGVR      = schema.GroupVersionResource{Group: "example.metactl.io", Version: "v1", Resource: "helloworlds"}
	configmapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// hook is a hello-world sync hook whose answer a test switches: "ok"
// (a ConfigMap with "Hello, WHO!"), "changed" ("Howdy, WHO!"), "invalid"
// (a child of an undeclared resource), "unsettled" (a status that
// counts the calls, so never the same), "refused" (a ConfigMap the API
// server's validation refuses).
type hook struct {
	*httptest.Server
	mode  atomic.Value
	calls atomic.Int64
}

func startHook(t *testing.T) *hook {
	h := &hook{}
	h.mode.Store("ok")
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		var req struct {
			Parent   *unstructured.Unstructured `json:"parent"`
			Children map[string]map[string]any  `json:"children"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		who, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "who")
		greeting := "Hello, " + who + "!"
		mode := h.mode.Load().(string)
		if mode == "changed" {
			greeting = "Howdy, " + who + "!"
		}
		children := []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": req.Parent.GetName() + "-greeting"},
			"data":     map[string]any{"greeting": greeting},
		}}
		status := map[string]any{"greeting": greeting, "configMaps": len(req.Children["ConfigMap.v1"])}
		if mode == "unsettled" {
			status["calls"] = h.calls.Load() // changes on every call
		}
		if mode == "refused" {
			// A data key the API server's validation refuses.
			children[0].(map[string]any)["data"] = map[string]any{"not a key!": greeting}
		}
		if mode == "invalid" {
			children = append(children, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "not-declared"}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status":   status,
			"children": children,
		})
	}))
	t.Cleanup(h.Close)
	return h
}

// controllerObject is a CompositeController of HelloWorlds labelled
// test=name (so that each test's controller manages only its parents),
// with its sync hook at hookURL.
func controllerObject(name, hookURL string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource": map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "helloworlds",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"test": name}}},
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hookURL + "/sync"}}},
		},
	}}
}

func parentObject(ns, name, test, who string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.metactl.io/v1", "kind": "HelloWorld",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"test": test}},
		"spec":     map[string]any{"who": who},
	}}
}

// setup installs a controller (name) and a parent in a new namespace and
// runs metactl until the parent's ConfigMap holds its greeting, then
// stops it: the state is then the hook's fixed point, with nothing running
// to change it.
func setup(t *testing.T, name string) (ns string, h *hook, metactl string) {
	t.Helper()
	ctx := context.Background()
	metactl = testenv.BuildMetactl(t)
	h = startHook(t)
	ns = env.CreateNamespace(t)
	cc := controllerObject(name, h.URL)
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := env.Dynamic.Resource(helloGVR).Namespace(ns).Create(ctx, parentObject(ns, "p", name, "World"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := testenv.StartProcess(t, metactl, "run", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", "", "--health-addr", "", "--workers", "4")
	testenv.Eventually(t, 30*time.Second, "the parent's ConfigMap and status", func(ctx context.Context) (bool, error) {
		p, err := env.Dynamic.Resource(helloGVR).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		greeting, _, _ := unstructured.NestedString(p.Object, "status", "greeting")
		configMaps, _, _ := unstructured.NestedInt64(p.Object, "status", "configMaps")
		return greeting == "Hello, World!" && configMaps == 1, nil
	})
	run.Stop(t, os.Interrupt, 30*time.Second)
	return ns, h, metactl
}

// plan runs metactl plan with args and returns its standard output and
// exit code (standard error is added to the output on failure to start).
func plan(t *testing.T, metactl string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, metactl, append([]string{"plan", "--kubeconfig", env.KubeconfigPath}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("running metactl plan: %v\n%s", err, errOut.String())
	}
	return out.String(), errOut.String(), 0
}

func resourceVersion(t *testing.T, gvr schema.GroupVersionResource, ns, name string) string {
	t.Helper()
	obj, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.GetResourceVersion()
}

// TestPlanShowsAChangedChild: at the hook's fixed point the plan has no
// changes (exit 0); with the hook answering another greeting, it shows
// the ConfigMap updated, naming the field, and the parent's status (exit
// 2); the live objects are left as they were.
func TestPlanShowsAChangedChild(t *testing.T) {
	ns, h, metactl := setup(t, "plan-changed")
	parentRV := resourceVersion(t, helloGVR, ns, "p")
	childRV := resourceVersion(t, configmapsGVR, ns, "p-greeting")

	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 0 {
		t.Fatalf("at the fixed point: exit %d, want 0\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"CompositeController plan-changed", "ConfigMap " + ns + "/p-greeting: unchanged", "1 sync; settled", "No changes."} {
		if !strings.Contains(out, want) {
			t.Errorf("at the fixed point, the plan lacks %q:\n%s", want, out)
		}
	}

	h.mode.Store("changed")
	out, errOut, code = plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 2 {
		t.Fatalf("with a changed hook: exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"ConfigMap " + ns + "/p-greeting: update",
		`~ .data.greeting: "Hello, World!" -> "Howdy, World!"`,
		`~ .status.greeting: "Hello, World!" -> "Howdy, World!"`,
		"settled",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("with a changed hook, the plan lacks %q:\n%s", want, out)
		}
	}
	if rv := resourceVersion(t, helloGVR, ns, "p"); rv != parentRV {
		t.Errorf("the parent's resourceVersion changed: %s, was %s", rv, parentRV)
	}
	if rv := resourceVersion(t, configmapsGVR, ns, "p-greeting"); rv != childRV {
		t.Errorf("the ConfigMap's resourceVersion changed: %s, was %s", rv, childRV)
	}
}

// auditEvent is what the test reads of an audit log line.
type auditEvent struct {
	Stage          string `json:"stage"`
	Verb           string `json:"verb"`
	RequestURI     string `json:"requestURI"`
	UserAgent      string `json:"userAgent"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

func readAudit(t *testing.T) []auditEvent {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e auditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			t.Fatalf("audit log line %q: %v", s.Text(), err)
		}
		out = append(out, e)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlanWritesNothing counts, in the API server's audit log, the write
// requests metactl plan sends (User-Agent "metactl/... (plan)") while it
// plans a live parent whose hook asks for changes, and a parent not yet
// created: there are some, and every one is a dry run; nothing changed.
func TestPlanWritesNothing(t *testing.T) {
	ns, h, metactl := setup(t, "plan-nowrite")
	h.mode.Store("changed")
	parentRV := resourceVersion(t, helloGVR, ns, "p")
	childRV := resourceVersion(t, configmapsGVR, ns, "p-greeting")

	if out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns); code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "new.yaml")
	data, _ := yaml.Marshal(parentObject(ns, "new", "plan-nowrite", "Ada").Object)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := plan(t, metactl, "-f", file); code != 2 {
		t.Fatalf("-f: exit %d, want 2\n%s%s", code, out, errOut)
	}

	// A marker write after the plans: once the audit log has it, it has
	// the plans' requests, made before.
	marker := "plan-test-marker-" + ns
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: marker}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var events []auditEvent
	testenv.Eventually(t, 30*time.Second, "the marker in the audit log", func(context.Context) (bool, error) {
		events = readAudit(t)
		for _, e := range events {
			if strings.Contains(e.RequestURI, "/namespaces/"+ns+"/configmaps") && e.Verb == "create" && e.Stage == "ResponseComplete" && !strings.Contains(e.UserAgent, "(plan)") {
				return true, nil
			}
		}
		return false, nil
	})
	writes := 0
	for _, e := range events {
		if !strings.Contains(e.UserAgent, "(plan)") || e.Stage != "ResponseComplete" {
			continue
		}
		writes++
		if !strings.Contains(e.RequestURI, "dryRun=All") {
			t.Errorf("metactl plan sent a write that is not a dry run: %s %s (%d)", e.Verb, e.RequestURI, e.ResponseStatus.Code)
		}
	}
	if writes == 0 {
		t.Fatal("the audit log has no write request of metactl plan: the test cannot tell whether they are dry runs")
	}
	t.Logf("%d write requests of metactl plan", writes)
	if rv := resourceVersion(t, helloGVR, ns, "p"); rv != parentRV {
		t.Errorf("the parent's resourceVersion changed: %s, was %s", rv, parentRV)
	}
	if rv := resourceVersion(t, configmapsGVR, ns, "p-greeting"); rv != childRV {
		t.Errorf("the ConfigMap's resourceVersion changed: %s, was %s", rv, childRV)
	}
	for _, name := range []string{"new", "new-greeting"} {
		gvr := helloGVR
		if name == "new-greeting" {
			gvr = configmapsGVR
		}
		if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s: %v, want NotFound", gvr.Resource, name, err)
		}
	}
}
