//go:build integration

package manager_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// finalizingHook answers sync calls with no children (attachments on
// /decorator) and finalize calls with finalized: finalize.
type finalizingHook struct {
	*httptest.Server
	finalize atomic.Bool
}

func newFinalizingHook(t *testing.T, finalize bool) *finalizingHook {
	h := &finalizingHook{}
	h.finalize.Store(finalize)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Finalizing bool `json:"finalizing"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		answer := map[string]any{}
		if strings.HasPrefix(r.URL.Path, "/decorator") {
			answer["attachments"] = []any{}
		} else {
			answer["children"] = []any{}
		}
		if req.Finalizing {
			answer["finalized"] = h.finalize.Load()
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(h.Close)
	return h
}

// createCRD creates a namespaced CRD of kind in group, waits until it is
// established and deletes it when the test ends.
func createCRD(t *testing.T, group, plural, kind string) schema.GroupVersionResource {
	t.Helper()
	ctx := context.Background()
	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	name := plural + "." + group
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := crds.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting CRD %s: %v", name, err)
		}
	})
	testenv.Eventually(t, 30*time.Second, "CRD "+name+" established", func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
}

// finalizingController returns a CompositeController (kind
// CompositeController) or DecoratorController (kind DecoratorController)
// of parents of gvr with a finalize hook at url.
func finalizingController(kind, name string, gvr schema.GroupVersionResource, url string) *unstructured.Unstructured {
	spec := map[string]any{}
	path := "/composite"
	parent := map[string]any{"apiVersion": gvr.GroupVersion().String(), "resource": gvr.Resource}
	if kind == "DecoratorController" {
		path = "/decorator"
		spec["resources"] = []any{parent}
	} else {
		spec["parentResource"] = parent
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}}
		spec["generateSelector"] = true
	}
	spec["hooks"] = map[string]any{
		"sync":     map[string]any{"webhook": map[string]any{"url": url + path}},
		"finalize": map[string]any{"webhook": map[string]any{"url": url + path}},
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

func createObject(t *testing.T, gvr schema.GroupVersionResource, kind, ns, name string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFinalizers waits until an object carries every finalizer in want.
func waitFinalizers(t *testing.T, gvr schema.GroupVersionResource, ns, name string, want ...string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, name+" finalizers "+strings.Join(want, ", "), func(ctx context.Context) (bool, error) {
		obj, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, f := range want {
			if !slices.Contains(obj.GetFinalizers(), f) {
				return false, nil
			}
		}
		return true, nil
	})
}

func waitGone(t *testing.T, client dynamic.ResourceInterface, name string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, name+" gone", func(ctx context.Context) (bool, error) {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// events returns the Events about the cluster-scoped object with uid.
func events(ctx context.Context, uid types.UID) ([]corev1.Event, error) {
	list, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// TestDeletingControllersAfterTheirParentCRD deletes a parent resource's
// CRD (its objects are finalized and go), then the CompositeController and
// the DecoratorController of that resource, as metacontroller's test
// scripts do: a resource that is no longer served has no finalizers left
// to remove, so both controller objects go at once.
func TestDeletingControllersAfterTheirParentCRD(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond})
	ctx := context.Background()
	gadgets := createCRD(t, "crd-gone.metactl.io", "gadgets", "Gadget")
	h := newFinalizingHook(t, true)
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	dcs := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
	if _, err := ccs.Create(ctx, finalizingController("CompositeController", "gadgets-cc", gadgets, h.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dcs.Create(ctx, finalizingController("DecoratorController", "gadgets-dc", gadgets, h.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := env.CreateNamespace(t)
	createObject(t, gadgets, "Gadget", ns, "g1")
	waitFinalizers(t, gadgets, ns, "g1", "metacontroller.io/compositecontroller-gadgets-cc", "metacontroller.io/decoratorcontroller-gadgets-dc")
	for _, c := range []struct {
		client dynamic.ResourceInterface
		name   string
	}{{ccs, "gadgets-cc"}, {dcs, "gadgets-dc"}} {
		obj, err := c.client.Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(obj.GetFinalizers(), manager.CleanupFinalizer) {
			t.Fatalf("%s lacks finalizer %s: %v", c.name, manager.CleanupFinalizer, obj.GetFinalizers())
		}
	}

	crds := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if err := crds.Delete(ctx, "gadgets.crd-gone.metactl.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, crds, "gadgets.crd-gone.metactl.io", 60*time.Second)
	testenv.Eventually(t, 30*time.Second, "gadgets no longer served", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(gadgets).List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err), nil
	})

	if err := ccs.Delete(ctx, "gadgets-cc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dcs.Delete(ctx, "gadgets-dc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ccs, "gadgets-cc", 10*time.Second)
	waitGone(t, dcs, "gadgets-dc", 10*time.Second)
}

// TestCleanupGivesUpWhenParentsCannotBeListed runs the manager as a user
// that loses the right to list a CompositeController's parents before the
// CompositeController is deleted: the failure is reported on the object
// (Ready=False CleanupFailed and a Warning Event), and after
// Options.CleanupTimeout the object goes anyway, with a Warning Event
// saying which objects may still carry the finalizer and how to remove it.
func TestCleanupGivesUpWhenParentsCannotBeListed(t *testing.T) {
	ctx := context.Background()
	sprockets := createCRD(t, "cleanup-forbidden.metactl.io", "sprockets", "Sprocket")
	rbac := []string{`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cleanup-metactl}
rules:
- apiGroups: [metacontroller.k8s.io]
  resources: ["*"]
  verbs: ["*"]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [events, configmaps]
  verbs: ["*"]
`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cleanup-metactl}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cleanup-metactl}
subjects: [{kind: User, name: cleanup-metactl, apiGroup: rbac.authorization.k8s.io}]
`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cleanup-metactl-sprockets}
rules:
- apiGroups: [cleanup-forbidden.metactl.io]
  resources: ["*"]
  verbs: ["*"]
`, `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cleanup-metactl-sprockets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cleanup-metactl-sprockets}
subjects: [{kind: User, name: cleanup-metactl, apiGroup: rbac.authorization.k8s.io}]
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
	limited.Impersonate = rest.ImpersonationConfig{UserName: "cleanup-metactl", Groups: []string{"system:authenticated"}}
	const timeout = 5 * time.Second
	runManager(t, manager.Options{Config: limited, Workers: 2, CleanupTimeout: timeout})

	h := newFinalizingHook(t, false)
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if _, err := ccs.Create(ctx, finalizingController("CompositeController", "sprockets", sprockets, h.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "sprockets", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	ns := env.CreateNamespace(t)
	createObject(t, sprockets, "Sprocket", ns, "s1")
	const parentFinalizer = "metacontroller.io/compositecontroller-sprockets"
	waitFinalizers(t, sprockets, ns, "s1", parentFinalizer)
	t.Cleanup(func() {
		// The finalizer left behind, removed by hand as the Event says.
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_, err := env.Dynamic.Resource(sprockets).Namespace(ns).Patch(context.Background(), "s1", types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing s1's finalizers: %v", err)
		}
	})

	if err := env.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, "cleanup-metactl-sprockets", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	limitedClient, err := dynamic.NewForConfig(limited)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "listing sprockets forbidden", func(ctx context.Context) (bool, error) {
		_, err := limitedClient.Resource(sprockets).List(ctx, metav1.ListOptions{})
		return apierrors.IsForbidden(err), nil
	})

	cc, err := ccs.Get(ctx, "sprockets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := ccs.Delete(ctx, "sprockets", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitReady(t, "sprockets", metav1.ConditionFalse, manager.ReasonCleanupFailed)
	if !strings.Contains(c.Message, "forbidden") {
		t.Errorf("condition message %q does not say why", c.Message)
	}
	waitGone(t, ccs, "sprockets", timeout+10*time.Second)
	if took := time.Since(deleted); took < timeout {
		t.Errorf("the CompositeController went after %v, before the cleanup timeout of %v", took, timeout)
	}

	var failed, abandoned *corev1.Event
	testenv.Eventually(t, 30*time.Second, "the CleanupFailed and CleanupAbandoned Events", func(ctx context.Context) (bool, error) {
		list, err := events(ctx, cc.GetUID())
		for i := range list {
			e := &list[i]
			switch {
			case e.Type == corev1.EventTypeWarning && e.Reason == manager.ReasonCleanupFailed:
				failed = e
			case e.Type == corev1.EventTypeWarning && e.Reason == manager.ReasonCleanupAbandoned:
				abandoned = e
			}
		}
		return failed != nil && abandoned != nil, err
	})
	for _, want := range []string{"sprockets.v1.cleanup-forbidden.metactl.io", parentFinalizer, "kubectl"} {
		if !strings.Contains(abandoned.Message, want) {
			t.Errorf("CleanupAbandoned Event %q does not name %q", abandoned.Message, want)
		}
	}
	// Giving up removed nothing it could not: s1 still carries the finalizer.
	s1, err := env.Dynamic.Resource(sprockets).Namespace(ns).Get(ctx, "s1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s1.GetFinalizers(), parentFinalizer) {
		t.Errorf("s1 lost finalizer %s although metactl may not list sprockets", parentFinalizer)
	}
}

// TestCleanupOfAControllerDeletedWhileMetactlWasDown deletes a
// CompositeController while no manager runs: the next manager removes the
// controller's finalizer from its parents before letting the object go.
func TestCleanupOfAControllerDeletedWhileMetactlWasDown(t *testing.T) {
	ctx := context.Background()
	gizmos := createCRD(t, "cleanup-restart.metactl.io", "gizmos", "Gizmo")
	h := newFinalizingHook(t, false)

	first, err := manager.New(manager.Options{Config: env.Config, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	firstCtx, stopFirst := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() { firstDone <- first.Run(firstCtx) }()
	t.Cleanup(stopFirst)

	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if _, err := ccs.Create(ctx, finalizingController("CompositeController", "gizmos", gizmos, h.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := env.CreateNamespace(t)
	createObject(t, gizmos, "Gizmo", ns, "g1")
	const parentFinalizer = "metacontroller.io/compositecontroller-gizmos"
	waitFinalizers(t, gizmos, ns, "g1", parentFinalizer)
	stopFirst()
	if err := <-firstDone; err != nil {
		t.Fatalf("Run: %v", err)
	}

	if err := ccs.Delete(ctx, "gizmos", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	waitGone(t, ccs, "gizmos", 10*time.Second)
	g1, err := env.Dynamic.Resource(gizmos).Namespace(ns).Get(ctx, "g1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(g1.GetFinalizers(), parentFinalizer) {
		t.Errorf("g1 keeps finalizer %s of the deleted CompositeController", parentFinalizer)
	}
}
