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
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var (
	env *testenv.Environment
	// auditLog is the API server's audit log of every write request.
	auditLog string
)

// auditPolicy logs every request that may write with its body (level
// Request: a DELETE's DeleteOptions, where the API server reads its
// dryRun) and metadata (URI with its query, verb, user agent, response
// code).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
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
// (a ConfigMap with "Hello, WHO!"), "changed" ("Howdy, WHO!"), "drop"
// (no child), "cycle" (a status that comes back after 5 calls), "invalid"
// (a child of an undeclared resource), "unsettled" (a status that
// counts the calls, so never the same), "refused" (a ConfigMap the API
// server's validation refuses).
type hook struct {
	*httptest.Server
	mode  atomic.Value
	calls atomic.Int64
	// authorized counts the calls that carried an Authorization header.
	authorized atomic.Int64
}

func startHook(t *testing.T) *hook {
	h := &hook{}
	h.mode.Store("ok")
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		if r.Header.Get("Authorization") != "" {
			h.authorized.Add(1)
		}
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
		if mode == "cycle" {
			// .status.n goes 1, 2, 3, 4, absent (0), 1...: the fifth
			// answer of a sync is the status it saw first.
			n, _, _ := unstructured.NestedInt64(req.Parent.Object, "status", "n")
			if n = (n + 1) % 5; n != 0 {
				status["n"] = n
			}
		}
		if mode == "unsettled" {
			status["calls"] = h.calls.Load() // changes on every call
		}
		if mode == "refused" {
			// A data key the API server's validation refuses.
			children[0].(map[string]any)["data"] = map[string]any{"not a key!": greeting}
		}
		if mode == "drop" {
			children = []any{}
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
	return controllerObjectWith(name, hookURL, "InPlace")
}

// controllerObjectWith is controllerObject with the ConfigMaps' update
// method.
func controllerObjectWith(name, hookURL, method string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource": map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "helloworlds",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"test": name}}},
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": method}}},
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
	return setupWith(t, name, "InPlace")
}

// setupWith is setup with the ConfigMaps' update method.
func setupWith(t *testing.T, name, method string) (ns string, h *hook, metactl string) {
	t.Helper()
	ctx := context.Background()
	metactl = testenv.BuildMetactl(t)
	h = startHook(t)
	ns = env.CreateNamespace(t)
	cc := controllerObjectWith(name, h.URL, method)
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := env.Dynamic.Resource(helloGVR).Namespace(ns).Create(ctx, parentObject(ns, "p", name, "World"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath,
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
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	// RequestObject is the request's body as the API server read it; a
	// DELETE's DeleteOptions, whose dryRun is the one the server obeys.
	RequestObject  json.RawMessage `json:"requestObject"`
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

// auditMarker writes a ConfigMap named name in ns and waits until the
// audit log has it; it returns the log's events up to and including it
// (the log is written in order: "audit-log-mode": "blocking").
func auditMarker(t *testing.T, ns, name string) []auditEvent {
	t.Helper()
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var events []auditEvent
	testenv.Eventually(t, 30*time.Second, "the marker "+name+" in the audit log", func(context.Context) (bool, error) {
		events = readAudit(t)
		for i, e := range events {
			if e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "configmaps" && e.Verb == "create" && e.Stage == "ResponseComplete" && strings.Contains(e.RequestURI, "/namespaces/"+ns+"/configmaps") && e.ResponseStatus.Code == 201 && e.ObjectRef.Name == name {
				events = events[:i+1]
				return true, nil
			}
		}
		return false, nil
	})
	return events
}

// childState is a child's UID and resourceVersion.
func childState(t *testing.T, ns, name string) string {
	t.Helper()
	obj, err := env.Dynamic.Resource(configmapsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(obj.GetUID()) + "@" + obj.GetResourceVersion()
}

// TestPlanWritesNothing counts, in the API server's audit log, every
// write request in the test's namespace, whoever sends it, while metactl
// plan plans a live parent whose hook replaces its child (the Recreate
// method: a DELETE and a POST), one whose hook drops it (a DELETE), and a
// parent not yet created: there are some, and every one is a dry run
// (a DELETE's in its DeleteOptions body, where the API server reads it);
// nothing changed: the child keeps its UID and resourceVersion.
func TestPlanWritesNothing(t *testing.T) {
	ns, h, metactl := setupWith(t, "plan-nowrite", "Recreate")
	parentRV := resourceVersion(t, helloGVR, ns, "p")
	child := childState(t, ns, "p-greeting")
	file := filepath.Join(t.TempDir(), "new.yaml")
	data, _ := yaml.Marshal(parentObject(ns, "new", "plan-nowrite", "Ada").Object)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Everything before this marker is the test's setup.
	before := len(auditMarker(t, ns, "plan-test-start"))

	h.mode.Store("changed")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 2 || !strings.Contains(out, "ConfigMap "+ns+"/p-greeting: replace\n") {
		t.Fatalf("a Recreate child changed: exit %d, want 2 and the child replaced (not refused)\n%s%s", code, out, errOut)
	}
	// The create after the dry-run delete is simulated, not refused
	// (409), and the rounds see the child again: the status counts it.
	for _, want := range []string{`~ .data.greeting: "Hello, World!" -> "Howdy, World!"`, "settled (", "0 unchanged; 1 change(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("a Recreate child changed: the plan lacks %q\n%s", want, out)
		}
	}
	if strings.Contains(out, ".status.configMaps") || strings.Contains(out, ".metadata.uid") {
		t.Errorf("a Recreate child changed: the plan shows the child absent, or its UID as a change\n%s", out)
	}
	h.mode.Store("drop")
	out, errOut, code = plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 2 || !strings.Contains(out, "ConfigMap "+ns+"/p-greeting: delete") {
		t.Fatalf("a child dropped: exit %d, want 2 and the child deleted\n%s%s", code, out, errOut)
	}
	h.mode.Store("ok")
	if out, errOut, code := plan(t, metactl, "-f", file); code != 2 {
		t.Fatalf("-f: exit %d, want 2\n%s%s", code, out, errOut)
	}

	// A marker write after the plans: once the audit log has it, it has
	// the plans' requests, made before.
	events := auditMarker(t, ns, "plan-test-end")
	writes, deletes := 0, 0
	for _, e := range events[before : len(events)-1] {
		if e.ObjectRef.Namespace != ns || e.Stage != "ResponseComplete" {
			continue
		}
		writes++
		dryRun := strings.Contains(e.RequestURI, "dryRun=All")
		if e.Verb == "delete" || e.Verb == "deletecollection" {
			deletes++
			var opts struct {
				DryRun []string `json:"dryRun"`
			}
			_ = json.Unmarshal(e.RequestObject, &opts)
			dryRun = slices.Contains(opts.DryRun, "All")
		}
		if !dryRun {
			t.Errorf("a write that is not a dry run reached the API server: %s %s by %q (%d)", e.Verb, e.RequestURI, e.UserAgent, e.ResponseStatus.Code)
		}
	}
	if writes == 0 || deletes == 0 {
		t.Fatalf("the audit log has %d write requests, %d deletes, in %s during the plans: the test cannot tell whether they are dry runs", writes, deletes, ns)
	}
	t.Logf("%d write requests (%d deletes) in %s during the plans", writes, deletes, ns)
	if rv := resourceVersion(t, helloGVR, ns, "p"); rv != parentRV {
		t.Errorf("the parent's resourceVersion changed: %s, was %s", rv, parentRV)
	}
	if got := childState(t, ns, "p-greeting"); got != child {
		t.Errorf("the child's UID@resourceVersion changed: %s, was %s", got, child)
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
