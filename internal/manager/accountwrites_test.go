//go:build integration

package manager_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestEveryWriteIsTheAccounts runs metactl as a ServiceAccount that may
// make every write below, and controllers acting as an account that may
// not make one of them each: the adoption of an orphan and the release of
// a child (patch of ConfigMaps), the ControllerRevision of a rolling
// update (create of controllerrevisions), and the removal of a stale
// finalizer (patch of the parent). Each is refused by the API server, in
// the account's name, reported on the parent, and not made: had metactl
// made it with its own client, it would have succeeded.
func TestEveryWriteIsTheAccounts(t *testing.T) {
	ctx := context.Background()
	system, ns := env.CreateNamespace(t), env.CreateNamespace(t)
	const group = "writes.test.metactl.io"
	kappas := createCRD(t, group, "kappas", "Kappa")
	lambdas := createCRD(t, group, "lambdas", "Lambda")
	mus := createCRD(t, group, "mus", "Mu")
	xis := createCRD(t, group, "xis", "Xi")

	role, binding := metactlRBAC("writes-test-metactl", system, []string{"sa-w"}, `
- apiGroups: [`+group+`]
  resources: [kappas, lambdas, mus, xis, kappas/status, lambdas/status, mus/status, xis/status]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [metacontroller.k8s.io]
  resources: [controllerrevisions]
  verbs: [get, list, watch, create, update, patch, delete]
`)
	applyYAML(t, role, binding,
		// The account reads what its controllers read, writes their
		// status, creates, updates and deletes ConfigMaps, and nothing
		// more: no patch of ConfigMaps (adoption, release), no write of
		// ControllerRevisions, no patch of parents (finalizers).
		fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: writes-test-account}
rules:
- apiGroups: [%[1]s]
  resources: [kappas, lambdas, mus, xis]
  verbs: [get, list, watch]
- apiGroups: [%[1]s]
  resources: [kappas/status, lambdas/status, mus/status, xis/status]
  verbs: [update, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [metacontroller.k8s.io]
  resources: [controllerrevisions]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: writes-test-account}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: writes-test-account}
subjects: [{kind: ServiceAccount, name: sa-w, namespace: %[2]s}]
`, group, ns))
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa-w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runManager(t, manager.Options{Config: serviceAccountConfig(t, system, "metactl"), Workers: 2})

	account := ns + "/sa-w"
	user := "system:serviceaccount:" + ns + ":sa-w"
	hook := accountsHook(t)
	controllers := newControllers(t)
	controllers.create("writes-claims", account, kappas, hook.URL+"/status-only", "", "configmaps")
	controllers.create("writes-revisions", account, lambdas, hook.URL+"/configmap", "", "configmaps:RollingInPlace")
	controllers.create("writes-finalizer", account, mus, hook.URL+"/status-only", "", "configmaps")
	for _, name := range []string{"writes-claims", "writes-revisions", "writes-finalizer"} {
		waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	}
	configMaps := env.Kube.CoreV1().ConfigMaps(ns)

	t.Run("adoption is the account's", func(t *testing.T) {
		parent := createParent(t, kappas, "Kappa", ns, "adopter")
		orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"controller-uid": string(parent.GetUID())}}}
		if _, err := configMaps.Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, parent, engine.ReasonSyncError, user, `cannot patch resource "configmaps"`)
		got, err := configMaps.Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if refs := got.GetOwnerReferences(); len(refs) > 0 {
			t.Errorf("the orphan was adopted (owners %v): metactl patched it with its own rights", refs)
		}
	})
	t.Run("release is the account's", func(t *testing.T) {
		parent := createParent(t, kappas, "Kappa", ns, "releaser")
		// Owned by the parent, not matched by its selector: released.
		owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stray", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: kappas.GroupVersion().String(), Kind: "Kappa", Name: parent.GetName(), UID: parent.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}}}
		if _, err := configMaps.Create(ctx, owned, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, parent, engine.ReasonSyncError, user, `cannot patch resource "configmaps"`)
		got, err := configMaps.Get(ctx, "stray", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if refs := got.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != parent.GetUID() {
			t.Errorf("the child was released (owners %v): metactl patched it with its own rights", refs)
		}
	})
	t.Run("ControllerRevisions are the account's", func(t *testing.T) {
		parent := createParent(t, lambdas, "Lambda", ns, "roller")
		waitEvent(t, parent, engine.ReasonSyncError, user, `cannot create resource "controllerrevisions"`)
		list, err := env.Dynamic.Resource(v1alpha1.ControllerRevisionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			t.Errorf("%d ControllerRevisions written (the first %s): metactl wrote them with its own rights", len(list.Items), list.Items[0].GetName())
		}
		if _, err := configMaps.Get(ctx, "roller-child", metav1.GetOptions{}); err == nil {
			t.Errorf("the child was written before its revision")
		}
	})
	t.Run("finalizer removal is the account's", func(t *testing.T) {
		// A stale finalizer of the controller, which has no finalize
		// hook: it comes off, if the account may patch the parent.
		const stale = "metacontroller.io/compositecontroller-writes-finalizer"
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": mus.GroupVersion().String(), "kind": "Mu",
			"metadata": map[string]any{"name": "held", "namespace": ns, "finalizers": []any{stale}},
		}}
		parent, err := env.Dynamic.Resource(mus).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// The administrator takes it off, so that the namespace goes.
			_, _ = env.Dynamic.Resource(mus).Namespace(ns).Patch(context.Background(), "held", types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		waitEvent(t, parent, engine.ReasonSyncError, user, `cannot patch resource "mus"`)
		got, err := env.Dynamic.Resource(mus).Namespace(ns).Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fs := got.GetFinalizers(); len(fs) != 1 || fs[0] != stale {
			t.Errorf("finalizers %v, want [%s]: metactl removed it with its own rights", fs, stale)
		}
	})
	t.Run("the cleanup of a deleted controller is the account's", func(t *testing.T) {
		// A controller with a finalize hook, whose object metactl holds
		// (metactl.io/cleanup) until its finalizer is off every parent:
		// the account may not patch the parent, so the cleanup fails,
		// says so, and succeeds once the administrator took it off.
		const name = "writes-cleanup"
		const fin = "metacontroller.io/compositecontroller-" + name
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": xis.GroupVersion().String(), "kind": "Xi",
			"metadata": map[string]any{"name": "kept", "namespace": ns, "finalizers": []any{fin}},
		}}
		if _, err := env.Dynamic.Resource(xis).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		unfinalize := func() {
			_, _ = env.Dynamic.Resource(xis).Namespace(ns).Patch(context.Background(), "kept", types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
		t.Cleanup(unfinalize)
		cc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
			"metadata": map[string]any{"name": name, "annotations": map[string]any{"metactl.io/service-account": account}},
			"spec": map[string]any{
				"parentResource":   map[string]any{"apiVersion": xis.GroupVersion().String(), "resource": xis.Resource},
				"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
				"generateSelector": true,
				"hooks": map[string]any{
					"sync":     map[string]any{"webhook": map[string]any{"url": hook.URL + "/status-only"}},
					"finalize": map[string]any{"webhook": map[string]any{"url": hook.URL + "/status-only"}},
				},
			},
		}}
		createController(t, v1alpha1.CompositeControllerResource, cc)
		waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
		testenv.Eventually(t, time.Minute, "xi kept synced", func(ctx context.Context) (bool, error) {
			got, err := env.Dynamic.Resource(xis).Namespace(ns).Get(ctx, "kept", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			synced, _, _ := unstructured.NestedBool(got.Object, "status", "synced")
			return synced, nil
		})
		if err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c := waitReady(t, name, metav1.ConditionFalse, manager.ReasonCleanupFailed)
		for _, want := range []string{user, `cannot patch resource "xis"`} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("condition message %q does not say %q", c.Message, want)
			}
		}
		got, err := env.Dynamic.Resource(xis).Namespace(ns).Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fs := got.GetFinalizers(); len(fs) != 1 || fs[0] != fin {
			t.Errorf("finalizers %v, want [%s]: metactl removed it with its own rights", fs, fin)
		}
		unfinalize()
		waitGone(t, env.Dynamic.Resource(v1alpha1.CompositeControllerResource), name, time.Minute)
	})
}
