//go:build integration

package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var env *testenv.Environment

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

var (
	widgetsGVR    = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "widgets"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// hook answers every widget with a ConfigMap <widget>-<tag> and counts calls.
type hook struct {
	*httptest.Server
	calls atomic.Int64
}

func newHook(t *testing.T, tag string) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": map[string]any{"tag": tag},
			"children": []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": req.Parent.GetName() + "-" + tag},
			}},
		})
	}))
	t.Cleanup(h.Close)
	return h
}

func compositeController(name, url string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"parentResource":   map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "widgets"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
			"generateSelector": true,
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": url}}},
		},
	}}
}

func readyCondition(t *testing.T, name string) *metav1.Condition {
	obj, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var status v1alpha1.ControllerStatus
	if raw, ok := obj.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
			t.Fatal(err)
		}
	}
	if status.ObservedGeneration != obj.GetGeneration() {
		return nil
	}
	return meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
}

func waitReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	testenv.Eventually(t, 60*time.Second, name+" Ready="+string(status)+" ("+reason+")", func(context.Context) (bool, error) {
		c = readyCondition(t, name)
		return c != nil && c.Status == status && c.Reason == reason, nil
	})
	return c
}

func waitObject(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, gvr.Resource+" "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// TestLifecycle drives one manager through a CompositeController's life:
// waiting for an unknown resource, starting when its CRD appears, restarting
// on a spec change, stopping on deletion, and reporting an invalid spec.
// runManager runs a manager built from opts until the returned function is
// called or the test ends, and fails the test if Run then returns an
// error.
func runManager(t *testing.T, opts manager.Options) (stop func()) {
	t.Helper()
	m, err := manager.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestLifecycle(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond})
	ctx := context.Background()

	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	first, second := newHook(t, "first"), newHook(t, "second")

	// Unknown resource: reported, and retried when discovery changes.
	if _, err := ccs.Create(ctx, compositeController("widgets", first.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitReady(t, "widgets", metav1.ConditionFalse, v1alpha1.ReasonUnknownResource)
	t.Logf("condition: %s", c.Message)
	applyWidgetsCRD(t)
	waitReady(t, "widgets", metav1.ConditionTrue, v1alpha1.ReasonRunning)

	ns := env.CreateNamespace(t)
	widget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metactl.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": ns},
	}}
	if _, err := env.Dynamic.Resource(widgetsGVR).Namespace(ns).Create(ctx, widget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMapsGVR, ns, "w1-first")

	// A spec change restarts the controller with the new hook.
	patch := []byte(`{"spec":{"hooks":{"sync":{"webhook":{"url":"` + second.URL + `"}}}}}`)
	if _, err := ccs.Patch(ctx, "widgets", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "widgets", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	waitObject(t, configMapsGVR, ns, "w1-second")
	firstCalls := first.calls.Load()

	// Deleted: the controller stops; a parent change calls no hook.
	if err := ccs.Delete(ctx, "widgets", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// An invalid spec, created after the delete, is reported; once it is,
	// the manager has handled the delete too (one queue, in order).
	invalid := compositeController("invalid", first.URL)
	invalid.Object["spec"].(map[string]any)["hooks"] = map[string]any{"sync": map[string]any{"webhook": map[string]any{}}}
	if _, err := ccs.Create(ctx, invalid, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c = waitReady(t, "invalid", metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec)
	t.Logf("condition: %s", c.Message)
	secondCalls := second.calls.Load()
	if _, err := env.Dynamic.Resource(widgetsGVR).Namespace(ns).Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"x":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// A controller that still ran would have called its hook for that
	// change well within the time the next condition takes to appear.
	other := compositeController("other", first.URL)
	other.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "nosuchthings"}
	if _, err := ccs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "other", metav1.ConditionFalse, v1alpha1.ReasonUnknownResource)
	if got := second.calls.Load(); got != secondCalls {
		t.Errorf("the deleted controller's hook was called %d more times", got-secondCalls)
	}
	if got := first.calls.Load(); got != firstCalls {
		t.Errorf("the replaced controller's hook was called %d more times", got-firstCalls)
	}
}

// TestDeletedDecoratorLeavesNoFinalizers deletes a DecoratorController
// with a finalize hook that never finishes: the manager must remove the
// controller's finalizer from every decorated object, then let the
// DecoratorController itself go.
func TestDeletedDecoratorLeavesNoFinalizers(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	h := newHook(t, "unused")
	ns := env.CreateNamespace(t)
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "DecoratorController",
		"metadata":   map[string]any{"name": "finalizing"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "finalizing"}}}},
			"hooks": map[string]any{
				"sync":     map[string]any{"webhook": map[string]any{"url": h.URL}},
				"finalize": map[string]any{"webhook": map[string]any{"url": h.URL}},
			},
		},
	}}
	dcs := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
	if _, err := dcs.Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := env.Dynamic.Resource(configMapsGVR).Namespace(ns)
	for _, name := range []string{"a", "b"} {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"decorate": "finalizing"}}}}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	finalized := func(name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			o, err := cms.Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(o.GetFinalizers()) == 1, err
		}
	}
	testenv.Eventually(t, 30*time.Second, "a's finalizer", finalized("a"))
	testenv.Eventually(t, 30*time.Second, "b's finalizer", finalized("b"))
	if err := dcs.Delete(ctx, "finalizing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the DecoratorController gone", func(ctx context.Context) (bool, error) {
		_, err := dcs.Get(ctx, "finalizing", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, name := range []string{"a", "b"} {
		o, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(o.GetFinalizers()) != 0 {
			t.Errorf("%s keeps finalizers %v (err %v)", name, o.GetFinalizers(), err)
		}
	}
}

// TestHookAuthErrorCondition points a controller's hook at a token Secret
// that does not exist: once a parent's sync fails for it, the controller
// reports Ready=False HookAuthError; creating the Secret mends it.
func TestHookAuthErrorCondition(t *testing.T) {
	// The hook is plain http, its token in the test's namespace.
	runManager(t, manager.Options{Config: env.Config, Workers: 2, CredentialNamespaces: []string{"*"}, AllowInsecureCredentials: true})
	ctx := context.Background()
	ns := env.CreateNamespace(t)
	var gotToken atomic.Value
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotToken.Store(r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"children": []}`))
	}))
	t.Cleanup(h.Close)
	cc := compositeController("authed", h.URL)
	cc.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "configmaps"}
	cc.Object["spec"].(map[string]any)["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}
	webhook := cc.Object["spec"].(map[string]any)["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)
	webhook["authorization"] = map[string]any{"type": "Bearer", "secretRef": map[string]any{"name": "hook-token", "namespace": ns}}
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "parent", "namespace": ns}}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitReady(t, "authed", metav1.ConditionFalse, v1alpha1.ReasonHookAuthError)
	if !strings.Contains(c.Message, ns+"/hook-token") {
		t.Errorf("condition message %q does not name the Secret", c.Message)
	}
	// The token under another key: the condition says which key is missing
	// and shows no value of the Secret.
	secrets := env.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace(ns)
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "hook-token", "namespace": ns}, "stringData": map[string]any{"tokne": "s3cret"}}}
	if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "authed Ready=False saying the key is missing", func(context.Context) (bool, error) {
		c = readyCondition(t, "authed")
		if c != nil && c.Reason == v1alpha1.ReasonHookAuthError && strings.Contains(c.Message, "key not found") {
			return true, nil
		}
		return false, fmt.Errorf("condition %+v", c)
	})
	if strings.Contains(c.Message, "s3cret") {
		t.Errorf("the condition leaks the Secret's data: %q", c.Message)
	}
	patch := []byte(`{"stringData":{"token":"s3cret"}}`)
	if _, err := secrets.Patch(ctx, "hook-token", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "authed", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	if got, _ := gotToken.Load().(string); got != "Bearer s3cret" {
		t.Errorf("the hook received Authorization %q", got)
	}
}

// TestForbiddenResourcesAreReported runs the manager as a user that may
// manage CompositeControllers but not their parents and children: the
// controller reports Ready=False Forbidden, naming what is missing, instead
// of waiting for caches that never sync.
func TestForbiddenResourcesAreReported(t *testing.T) {
	ctx := context.Background()
	rbac := []string{`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: limited-metactl}
rules:
- apiGroups: [metacontroller.k8s.io]
  resources: [compositecontrollers, decoratorcontrollers, compositecontrollers/status, decoratorcontrollers/status]
  verbs: [get, list, watch, update, patch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, update]
`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: limited-metactl}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: limited-metactl}
subjects: [{kind: User, name: limited-metactl, apiGroup: rbac.authorization.k8s.io}]
`}
	for _, doc := range rbac {
		file := filepath.Join(t.TempDir(), "rbac.yaml")
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(ctx, "apply", "-f", file); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	limited := rest.CopyConfig(env.Config)
	limited.Impersonate = rest.ImpersonationConfig{UserName: "limited-metactl", Groups: []string{"system:authenticated"}}
	runManager(t, manager.Options{Config: limited, Workers: 2})
	cc := compositeController("forbidden", "http://127.0.0.1:1/sync")
	cc.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "configmaps"}
	cc.Object["spec"].(map[string]any)["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitReady(t, "forbidden", metav1.ConditionFalse, v1alpha1.ReasonForbidden)
	for _, want := range []string{"list configmaps", "create secrets"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not name %q", c.Message, want)
		}
	}
}

// TestInvalidSpecsAreReported creates CompositeControllers that the CRD
// schema accepts but metactl cannot run: each reports Ready=False
// InvalidSpec naming the problem, and the others keep running.
func TestInvalidSpecsAreReported(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	cases := map[string]struct {
		edit func(spec map[string]any)
		want string
	}{
		"bad-url": {func(spec map[string]any) {
			spec["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["url"] = "http://[::1/sync"
		}, "spec.hooks.sync.webhook.url"},
		"no-sync-hook": {func(spec map[string]any) {
			spec["hooks"] = map[string]any{"finalize": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/finalize"}}}
		}, "a sync hook is required"},
		// HorizontalPodAutoscalers under two versions (metacontroller
		// issue #437): each would see the other's copy of every child as
		// unwanted and delete it, forever.
		"hpa-two-versions": {func(spec map[string]any) {
			spec["childResources"] = []any{
				map[string]any{"apiVersion": "autoscaling/v1", "resource": "horizontalpodautoscalers"},
				map[string]any{"apiVersion": "autoscaling/v2", "resource": "horizontalpodautoscalers"},
			}
		}, "spec.childResources[1].apiVersion: Invalid value: \"autoscaling/v2\": spec.childResources lists this resource under autoscaling/v1 too"},
	}
	for name, tc := range cases {
		cc := compositeController("invalid-"+name, "http://127.0.0.1:1/sync")
		spec := cc.Object["spec"].(map[string]any)
		spec["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "secrets"}
		tc.edit(spec)
		if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: the server rejected it: %v", name, err)
		}
	}
	valid := compositeController("valid-neighbour", "http://127.0.0.1:1/sync")
	valid.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "secrets"}
	if _, err := ccs.Create(ctx, valid, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		c := waitReady(t, "invalid-"+name, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec)
		if !strings.Contains(c.Message, tc.want) {
			t.Errorf("%s: condition message %q lacks %q", name, c.Message, tc.want)
		}
	}
	waitReady(t, "valid-neighbour", metav1.ConditionTrue, v1alpha1.ReasonRunning)
}
