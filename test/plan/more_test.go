package plan

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

func writeYAML(t *testing.T, name string, obj any) string {
	t.Helper()
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestPlanNewParent: a parent given with -f that does not exist has its
// ConfigMap shown as created, and its status as the hook asks.
func TestPlanNewParent(t *testing.T) {
	ns, _, metactl := setup(t, "plan-new")
	file := writeYAML(t, "new.yaml", parentObject(ns, "ada", "plan-new", "Ada").Object)
	out, errOut, code := plan(t, metactl, "-f", file)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"(not created yet)",
		"ConfigMap " + ns + "/ada-greeting: create",
		`+ .data.greeting: "Hello, Ada!"`,
		`+ .status.greeting: "Hello, Ada!"`,
		"1 to create",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanInvalidAnswer: a hook answering a child of an undeclared
// resource fails the plan (exit 1) with the reconciler's error.
func TestPlanInvalidAnswer(t *testing.T) {
	ns, h, metactl := setup(t, "plan-invalid")
	h.mode.Store("invalid")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "error: invalid sync hook response") || !strings.Contains(out, "Secret") {
		t.Errorf("the plan does not give the reconciler's error:\n%s%s", out, errOut)
	}
	if !strings.Contains(out, "Plan failed.") || strings.Contains(out, "No changes.") {
		t.Errorf("a failed plan does not end with \"Plan failed.\":\n%s", out)
	}
}

// TestPlanRefusedWrite: a child the API server refuses, as its dry run
// shows, fails the plan (exit 1), naming the child and the refusal.
func TestPlanRefusedWrite(t *testing.T) {
	ns, h, metactl := setup(t, "plan-refused")
	h.mode.Store("refused")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"ConfigMap " + ns + "/p-greeting: update (refused: 422", "error: "} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanUnsettled: a hook whose status changes on every call does not
// settle: the plan says so and has changes (exit 2).
func TestPlanUnsettled(t *testing.T) {
	ns, h, metactl := setup(t, "plan-unsettled")
	h.mode.Store("unsettled")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"5 sync; does not settle in 5 calls", "HookNotSettled", ".status.calls"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanUnsettledOnLiveState: a hook whose status goes round a cycle of
// 5 does not settle in 5 calls, and its last answer is the live state: no
// child or field would change, yet the hook still asks for changes, so
// the plan has changes (exit 2), as docs/plan.md says.
func TestPlanUnsettledOnLiveState(t *testing.T) {
	ns, h, metactl := setup(t, "plan-cycle")
	h.mode.Store("cycle")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 2 || !strings.Contains(out, "5 sync; does not settle in 5 calls") {
		t.Fatalf("exit %d, want 2 and not settled\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "HelloWorld: no change") {
		t.Errorf("the last answer is not the live state, so the test proves nothing:\n%s", out)
	}
}

// TestPlanRolling: a rolling update writes one revision per sync, which
// ends the sync: the plan says the fixed point was not checked, rather
// than "settled" after one call.
func TestPlanRolling(t *testing.T) {
	ns, h, metactl := setupWith(t, "plan-rolling", "RollingInPlace")
	h.mode.Store("changed")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "not checked (rolling update: one revision per sync") || strings.Contains(out, "; settled (") {
		t.Errorf("a rolling update's plan claims a fixed point it did not check:\n%s", out)
	}
}

// TestPlanHookURL: the controller in the cluster names a hook that does
// not answer; --hook-url calls another, with --controller's object too;
// a hook given as a Service is refused with what to do.
func TestPlanHookURL(t *testing.T) {
	ns, h, metactl := setup(t, "plan-hookurl")
	cc := controllerObject("plan-hookurl", "http://127.0.0.1:1")
	ctrlFile := writeYAML(t, "controller.yaml", cc.Object)

	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns, "--controller", ctrlFile)
	if code != 1 || !strings.Contains(out, "error: ") {
		t.Fatalf("a hook that does not answer: exit %d, want 1 and an error\n%s%s", code, out, errOut)
	}
	calls := h.calls.Load()
	out, errOut, code = plan(t, metactl, "helloworlds/p", "-n", ns, "--controller", ctrlFile, "--hook-url", h.URL+"/sync")
	if code != 0 {
		t.Fatalf("--hook-url: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if h.calls.Load() == calls {
		t.Error("--hook-url: the hook was not called")
	}

	svc := controllerObject("plan-hookurl", "")
	_ = unstructuredSet(svc.Object, map[string]any{"service": map[string]any{"name": "hook", "namespace": "hooks", "port": int64(8080)}, "path": "/sync"},
		"spec", "hooks", "sync", "webhook")
	svcFile := writeYAML(t, "service.yaml", svc.Object)
	out, errOut, code = plan(t, metactl, "helloworlds/p", "-n", ns, "--controller", svcFile)
	if code != 1 || !strings.Contains(errOut, "kubectl port-forward -n hooks svc/hook 8080:8080") || !strings.Contains(errOut, "--hook-url http://127.0.0.1:8080 ") {
		t.Errorf("a Service hook: exit %d, want 1 and how to reach it\n%s%s", code, out, errOut)
	}
}

// TestPlanHookURLCredentials: a hook replaced by --hook-url gets no
// credentials, not even those of a spec.endpointConfigs entry whose host
// is the new address's; a hook left alone keeps them, and over http they
// are refused with a hint for plan (not metactl run's flag).
func TestPlanHookURLCredentials(t *testing.T) {
	ns, h, metactl := setup(t, "plan-hookurl-creds")
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hook-token"},
		StringData: map[string]string{"credentials": "s3cret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	cc := controllerObject("plan-hookurl-creds", "http://hooks.invalid")
	_ = unstructuredSet(cc.Object, []any{map[string]any{
		"host":          u.Host,
		"authorization": map[string]any{"secretRef": map[string]any{"name": "hook-token", "namespace": ns}},
	}}, "spec", "endpointConfigs")
	ctrlFile := writeYAML(t, "controller.yaml", cc.Object)
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns, "--controller", ctrlFile, "--hook-url", h.URL)
	if code != 0 || h.calls.Load() == 0 {
		t.Fatalf("--hook-url at a host with endpointConfigs credentials: exit %d, want 0\n%s%s", code, out, errOut)
	}
	if n := h.authorized.Load(); n != 0 {
		t.Errorf("the hook replaced by --hook-url got an Authorization header in %d calls", n)
	}

	// Without --hook-url, the hook's own address takes the entry's
	// credentials, refused over http with plan's hint.
	cc = controllerObject("plan-hookurl-creds", h.URL)
	_ = unstructuredSet(cc.Object, map[string]any{"secretRef": map[string]any{"name": "hook-token", "namespace": ns}},
		"spec", "hooks", "sync", "webhook", "authorization")
	ctrlFile = writeYAML(t, "own.yaml", cc.Object)
	out, errOut, code = plan(t, metactl, "helloworlds/p", "-n", ns, "--controller", ctrlFile)
	if code != 1 || !strings.Contains(out+errOut, "pass --hook-url") || strings.Contains(out+errOut, "--allow-insecure-credentials") {
		t.Errorf("credentials over http: exit %d, want 1 and plan's hint\n%s%s", code, out, errOut)
	}
}

func unstructuredSet(obj map[string]any, value any, path ...string) error {
	m := obj
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
	return nil
}

// TestPlanJSON: -o json is one JSON document with the fields docs/plan.md
// documents.
func TestPlanJSON(t *testing.T) {
	ns, h, metactl := setup(t, "plan-json")
	h.mode.Store("changed")
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns, "-o", "json")
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	var report struct {
		Object struct {
			APIVersion, Kind, Namespace, Name, UID string
		} `json:"object"`
		Exists      *bool `json:"exists"`
		Controllers []struct {
			Controller struct{ APIVersion, Kind, Name string } `json:"controller"`
			Selected   *bool                                   `json:"selected"`
			Finalizing *bool                                   `json:"finalizing"`
			HookCalls  map[string]int                          `json:"hookCalls"`
			Settled    *bool                                   `json:"settled"`
			Error      string                                  `json:"error"`
			Changed    *bool                                   `json:"changed"`
			Children   []struct {
				APIVersion, Kind, Namespace, Name, UID string
				Action                                 string `json:"action"`
				Changes                                []struct {
					Path, Op string
					Old, New any
				} `json:"changes"`
			} `json:"children"`
			Object []struct {
				Path, Op string
				Old, New any
			} `json:"object"`
			Events []struct {
				Object, Type, Reason, Message string
			} `json:"events"`
			Writes []struct {
				Method, Path, Group, Version, Resource, Namespace, Name, Subresource string
				ContentType, Error                                                   string
				Code                                                                 int
				Request, Response                                                    json.RawMessage
				Simulated                                                            bool
			} `json:"writes"`
		} `json:"controllers"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if report.Object.Kind != "HelloWorld" || report.Object.Name != "p" || report.Object.UID == "" || report.Exists == nil || !*report.Exists {
		t.Errorf("object: %+v exists %v", report.Object, report.Exists)
	}
	if len(report.Controllers) != 1 {
		t.Fatalf("%d controllers, want 1:\n%s", len(report.Controllers), out)
	}
	c := report.Controllers[0]
	if c.Controller.Name != "plan-json" || !*c.Selected || *c.Finalizing || c.HookCalls["sync"] < 1 || !*c.Settled || !*c.Changed || c.Error != "" {
		t.Errorf("controller plan: %+v", c)
	}
	if len(c.Children) != 1 || c.Children[0].Action != "update" || len(c.Children[0].Changes) != 1 ||
		c.Children[0].Changes[0].Path != ".data.greeting" || c.Children[0].Changes[0].New != "Howdy, World!" {
		t.Errorf("children: %+v", c.Children)
	}
	if len(c.Object) == 0 {
		t.Error("no change to the parent's status")
	}
	patched := false
	for _, w := range c.Writes {
		patched = patched || ((w.Method == "PUT" || w.Method == "PATCH") && w.Resource == "configmaps" && w.Name == "p-greeting" && w.Code == 200 && len(w.Response) > 0)
	}
	if !patched {
		t.Errorf("writes lack the ConfigMap's update:\n%s", out)
	}
}

// TestPlanNamespacedRights: a user whose Role grants everything on the
// parent and its children in the object's namespace, and nothing at
// cluster scope, gets exit 1 at once (well within --cache-timeout) with
// the resource and the right plan needs, not a wait for caches that never
// fill.
func TestPlanNamespacedRights(t *testing.T) {
	ns, _, metactl := setup(t, "plan-nsrights")
	ctx := context.Background()
	user := "plan-ns-user"
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "plan"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"example.metactl.io"}, Resources: []string{"helloworlds", "helloworlds/status"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "plan"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "plan"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.ImpersonatingKubeconfig(t, user)
	ctrlFile := writeYAML(t, "controller.yaml", controllerObject("plan-nsrights", "http://127.0.0.1:1").Object)

	start := time.Now()
	// The later --kubeconfig wins over plan()'s own.
	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns, "--controller", ctrlFile, "--kubeconfig", kubeconfig)
	elapsed := time.Since(start)
	if code != 1 || !strings.Contains(errOut, "in all namespaces (cluster scope)") || !strings.Contains(errOut, "forbidden") ||
		!strings.Contains(errOut, "it needs list and watch on") {
		t.Fatalf("namespaced rights only: exit %d, want 1 and the rights needed\n%s%s", code, out, errOut)
	}
	if elapsed > 30*time.Second {
		t.Errorf("namespaced rights only: plan took %s, want well within --cache-timeout (60s)", elapsed)
	}
	t.Logf("%s: %s", elapsed, errOut)
}

// TestPlanUnbuiltControllers: with no controller managing the object, a
// controller of the cluster that cannot be built (a child resource the
// API server does not serve) is named in the error, not skipped silently.
func TestPlanUnbuiltControllers(t *testing.T) {
	ns, _, metactl := setup(t, "plan-unbuilt")
	ctx := context.Background()
	broken := controllerObject("plan-unbuilt-broken", "http://127.0.0.1:1")
	_ = unstructuredSet(broken.Object, []any{map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "nosuchthings"}}, "spec", "childResources")
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), "plan-unbuilt-broken", metav1.DeleteOptions{})
	})
	orphan := parentObject(ns, "orphan", "no-such-controller", "Nobody")
	if _, err := env.Dynamic.Resource(helloGVR).Namespace(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := plan(t, metactl, "helloworlds/orphan", "-n", ns)
	if code != 1 || !strings.Contains(errOut, "no CompositeController or DecoratorController manages") ||
		!strings.Contains(errOut, "could not be built") || !strings.Contains(errOut, "CompositeController plan-unbuilt-broken: ") {
		t.Errorf("exit %d, want 1 and the controller that could not be built named\n%s%s", code, out, errOut)
	}
}

// TestPlanParentVersion: a controller matches its parentResource's
// apiVersion exactly; the object named on the command line is read at the
// version discovery prefers (v2 here), and plan reads it again at the
// controller's (v1), so the controller plans it.
func TestPlanParentVersion(t *testing.T) {
	ctx := context.Background()
	metactl := testenv.BuildMetactl(t)
	h := startHook(t)
	ns := env.CreateNamespace(t)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	version := func(name string, storage bool) map[string]any {
		return map[string]any{"name": name, "served": true, "storage": storage, "schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true}}, "subresources": map[string]any{"status": map[string]any{}}}
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.plan.metactl.io"},
		"spec": map[string]any{"group": "plan.metactl.io", "scope": "Namespaced",
			"names":    map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{version("v1", true), version("v2", false)}},
	}}
	if _, err := env.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(crdGVR).Delete(context.Background(), "widgets.plan.metactl.io", metav1.DeleteOptions{})
	})
	v1 := schema.GroupVersionResource{Group: "plan.metactl.io", Version: "v1", Resource: "widgets"}
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "plan.metactl.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": ns, "labels": map[string]any{"test": "plan-version"}},
		"spec":     map[string]any{"who": "Widget"},
	}}
	testenv.Eventually(t, 30*time.Second, "the Widget created", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(v1).Namespace(ns).Create(ctx, widget, metav1.CreateOptions{})
		return err == nil, nil
	})
	cc := controllerObject("plan-version", h.URL)
	_ = unstructuredSet(cc.Object, map[string]any{"apiVersion": "plan.metactl.io/v1", "resource": "widgets",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"test": "plan-version"}}}, "spec", "parentResource")
	ctrlFile := writeYAML(t, "controller.yaml", cc.Object)
	var out, errOut string
	code := -1
	testenv.Eventually(t, 30*time.Second, "discovery serving widgets at v2", func(context.Context) (bool, error) {
		out, errOut, code = plan(t, metactl, "widgets/w", "-n", ns, "--controller", ctrlFile)
		return !strings.Contains(errOut, "the server doesn't have a resource type"), nil
	})
	if code != 2 || !strings.Contains(out, "ConfigMap "+ns+"/w-greeting: create") {
		t.Errorf("a controller of widgets at v1, the object read at v2: exit %d, want 2 and the child created\n%s%s", code, out, errOut)
	}
}

// TestPlanNewParentTwoControllers: two controllers planning an object
// not yet created each start from the object as given: the second does
// not see the labels the first's simulated writes left.
func TestPlanNewParentTwoControllers(t *testing.T) {
	metactl := testenv.BuildMetactl(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Controller *unstructured.Unstructured `json:"controller"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"labels":      map[string]any{"by-" + req.Controller.GetName(): "yes"},
			"attachments": []any{},
		})
	}))
	t.Cleanup(hook.Close)
	ns := env.CreateNamespace(t)
	var args []string
	for _, name := range []string{"plan-sim-a", "plan-sim-b"} {
		dc := map[string]any{
			"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"resources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "plan-sim"}}}},
				"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
				"hooks":       map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
			},
		}
		args = append(args, "--controller", writeYAML(t, name+".yaml", dc))
	}
	file := writeYAML(t, "new.yaml", map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "new", "namespace": ns, "labels": map[string]any{"decorate": "plan-sim"}}})
	out, errOut, code := plan(t, metactl, append([]string{"-f", file}, args...)...)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	_, second, _ := strings.Cut(out, "DecoratorController plan-sim-b")
	if !strings.Contains(second, `by-plan-sim-b`) || strings.Contains(second, "by-plan-sim-a") {
		t.Errorf("the second controller's plan does not start from the object as given:\n%s", out)
	}
}
