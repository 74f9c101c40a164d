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
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// applyYAML applies YAML documents with kubectl, as the administrator.
func applyYAML(t *testing.T, docs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := env.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-f", file); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
}

// serviceAccountConfig returns a config that authenticates as a new
// ServiceAccount namespace/name with a token of its own (not by
// impersonation: the API server does not chain impersonations).
func serviceAccountConfig(t *testing.T, namespace, name string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := env.Kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	token, err := env.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token.Status.Token
	return cfg
}

// accountsHook answers the sync and customize hooks of the controllers of
// TestControllersActAsTheirServiceAccounts: on /configmap a ConfigMap
// <parent>-child (on /attach, as an attachment); on /by-name a Secret for a parent whose name starts with
// "secret", else a ConfigMap; on /customize, for a parent whose name
// starts with "related", Pods of its namespace; on /status-only a status
// and no children.
func accountsHook(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
			Object *unstructured.Unstructured `json:"object"` // a DecoratorController's
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if req.Parent == nil {
			req.Parent = req.Object
		}
		if req.Parent == nil {
			http.Error(w, "no parent or object", http.StatusBadRequest)
			return
		}
		name := req.Parent.GetName()
		if r.URL.Path == "/status-only" {
			_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"synced": true}, "children": []any{}})
			return
		}
		if r.URL.Path == "/customize" {
			var related []any
			if strings.HasPrefix(name, "related") {
				related = append(related, map[string]any{"apiVersion": "v1", "resource": "pods"})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"relatedResources": related})
			return
		}
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name + "-child"}}
		if r.URL.Path == "/by-name" && strings.HasPrefix(name, "secret") {
			child = map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name + "-child"}, "type": "Opaque"}
		}
		list := "children"
		if r.URL.Path == "/attach" {
			list = "attachments"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"synced": true}, list: []any{child}})
	}))
	t.Cleanup(s.Close)
	return s
}

// TestControllersActAsTheirServiceAccounts runs metactl as a ServiceAccount
// of its own that may write ConfigMaps and Secrets everywhere, and
// controllers that each name a ServiceAccount: each writes only what its
// account may, a controller whose account may not read its children does
// not start, nor one whose account metactl may not impersonate, nor one
// whose annotation is malformed, nor one whose hook's credential Secret the
// account may not get; a right revoked stops a running controller; a
// related resource the account may not read fails its parent's sync.
func TestControllersActAsTheirServiceAccounts(t *testing.T) {
	ctx := context.Background()
	system, nsA, nsB := env.CreateNamespace(t), env.CreateNamespace(t), env.CreateNamespace(t)
	const group = "accounts.test.metactl.io"
	alphas := createCRD(t, group, "alphas", "Alpha")
	betas := createCRD(t, group, "betas", "Beta")
	gammas := createCRD(t, group, "gammas", "Gamma")
	deltas := createCRD(t, group, "deltas", "Delta")
	epsilons := createCRD(t, group, "epsilons", "Epsilon")
	zetas := createCRD(t, group, "zetas", "Zeta")
	etas := createCRD(t, group, "etas", "Eta")
	thetas := createCRD(t, group, "thetas", "Theta")

	// metactl itself: everything it needs, the right to write ConfigMaps
	// and Secrets everywhere (so that only the accounts' rights can refuse
	// a write), and to impersonate the ServiceAccounts named sa-a, sa-b
	// and sa-c, no other.
	role, binding := metactlRBAC("accounts-test-metactl", system, []string{"sa-a", "sa-b", "sa-c"}, `
- apiGroups: [`+group+`]
  resources: [alphas, betas, gammas, deltas, epsilons, zetas, etas, thetas, alphas/status, betas/status, gammas/status, deltas/status, epsilons/status, zetas/status, etas/status, thetas/status]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [metacontroller.k8s.io]
  resources: [controllerrevisions]
  verbs: [get, list, watch, create, update, patch, delete]
`)
	applyYAML(t, role, binding,
		// Account A reads alphas and ConfigMaps everywhere, and writes
		// ConfigMaps and alphas in namespace A only.
		accountRBAC("a", nsA, group, "alphas, epsilons, zetas, etas", []string{"configmaps"}, []string{"configmaps"}),
		// Account B reads betas, ConfigMaps and Secrets everywhere, and
		// writes ConfigMaps and betas (not Secrets) in namespace B only.
		accountRBAC("b", nsB, group, "betas", []string{"configmaps", "secrets"}, []string{"configmaps"}),
		// Account C may read and write gammas but not ConfigMaps, its
		// controller's children.
		accountRBAC("c", nsA, group, "gammas", nil, nil),
		// Account A may read thetas, and not write them or their status.
		fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: accounts-test-read-thetas}
rules:
- apiGroups: [%[1]s]
  resources: [thetas]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: accounts-test-read-thetas}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: accounts-test-read-thetas}
subjects: [{kind: ServiceAccount, name: sa-a, namespace: %[2]s}]
`, group, nsA),
	)
	for _, sa := range []struct{ ns, name string }{{nsA, "sa-a"}, {nsB, "sa-b"}, {nsA, "sa-c"}} {
		if _, err := env.Kube.CoreV1().ServiceAccounts(sa.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Another team's hook token, in a namespace hooks' credentials may
	// come from.
	createSecret(t, system, "team-b-token", map[string]string{"token": "team-b-secret-token"})
	runManager(t, manager.Options{Config: serviceAccountConfig(t, system, "metactl"), Workers: 2, CredentialNamespaces: []string{system},
		AccountReviewTTL: 2 * time.Second})

	hook := accountsHook(t)
	controllers := newControllers(t)
	controllers.create("accounts-a", nsA+"/sa-a", alphas, hook.URL+"/configmap", "", "configmaps")
	controllers.create("accounts-b", nsB+"/sa-b", betas, hook.URL+"/by-name", hook.URL+"/customize", "configmaps", "secrets")
	controllers.create("accounts-c", nsA+"/sa-c", gammas, hook.URL+"/configmap", "", "configmaps")
	controllers.create("accounts-d", nsA+"/sa-d", deltas, hook.URL+"/configmap", "", "configmaps")
	controllers.create("accounts-bad", "no-slash", deltas, hook.URL+"/configmap", "", "configmaps")
	controllers.create("accounts-e", nsA+"/sa-a", epsilons, hook.URL+"/configmap", "", "configmaps:RollingInPlace")
	controllers.create("accounts-status", nsA+"/sa-a", thetas, hook.URL+"/status-only", "", "configmaps")

	t.Run("each writes what its account may", func(t *testing.T) {
		waitReady(t, "accounts-a", metav1.ConditionTrue, v1alpha1.ReasonRunning)
		waitReady(t, "accounts-b", metav1.ConditionTrue, v1alpha1.ReasonRunning)
		createObject(t, alphas, "Alpha", nsA, "one")
		createObject(t, betas, "Beta", nsB, "one")
		waitObject(t, configMapsGVR, nsA, "one-child")
		waitObject(t, configMapsGVR, nsB, "one-child")
	})
	t.Run("a write the account may not make is refused and reported on the parent", func(t *testing.T) {
		// A may not write in namespace B; B may not write Secrets.
		outside := createParent(t, alphas, "Alpha", nsB, "outside")
		secret := createParent(t, betas, "Beta", nsB, "secret")
		waitEvent(t, outside, engine.ReasonSyncError, "system:serviceaccount:"+nsA+":sa-a", `cannot create resource "configmaps"`)
		waitEvent(t, secret, engine.ReasonSyncError, "system:serviceaccount:"+nsB+":sa-b", `cannot create resource "secrets"`)
		for _, c := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{configMapsGVR, "outside-child"}, {schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "secret-child"}} {
			if _, err := env.Dynamic.Resource(c.gvr).Namespace(nsB).Get(ctx, c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s %s/%s: got %v, want NotFound: metactl wrote what the account may not", c.gvr.Resource, nsB, c.name, err)
			}
		}
	})
	t.Run("a parent's status is written as the account", func(t *testing.T) {
		// A may read thetas but not write their status: metactl, which
		// may, does not write it for A.
		waitReady(t, "accounts-status", metav1.ConditionTrue, v1alpha1.ReasonRunning)
		parent := createParent(t, thetas, "Theta", nsA, "theta")
		waitEvent(t, parent, engine.ReasonSyncError, "system:serviceaccount:"+nsA+":sa-a", `thetas/status`)
		obj, err := env.Dynamic.Resource(thetas).Namespace(nsA).Get(ctx, "theta", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if status, found, _ := unstructured.NestedMap(obj.Object, "status"); found && len(status) > 0 {
			t.Errorf("the parent's status was written: %v", status)
		}
	})
	t.Run("a DecoratorController's attachments are its account's", func(t *testing.T) {
		dc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
			"metadata": map[string]any{"name": "accounts-decorator", "annotations": map[string]any{"metactl.io/service-account": nsA + "/sa-a"}},
			"spec": map[string]any{
				"resources":   []any{map[string]any{"apiVersion": zetas.GroupVersion().String(), "resource": zetas.Resource}},
				"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
				"hooks":       map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/attach"}}},
			},
		}}
		dcs := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
		if _, err := dcs.Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dcs.Delete(context.Background(), dc.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting DecoratorController %s: %v", dc.GetName(), err)
			}
		})
		createObject(t, zetas, "Zeta", nsA, "zeta")
		waitObject(t, configMapsGVR, nsA, "zeta-child")
		outside := createParent(t, zetas, "Zeta", nsB, "zeta")
		waitEvent(t, outside, engine.ReasonSyncError, "system:serviceaccount:"+nsA+":sa-a", `cannot create resource "configmaps"`)
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(nsB).Get(ctx, "zeta-child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s/zeta-child: got %v, want NotFound: metactl wrote what the account may not", nsB, err)
		}
	})
	t.Run("a related resource the account may not read fails the sync", func(t *testing.T) {
		parent := createParent(t, betas, "Beta", nsB, "related")
		waitEvent(t, parent, engine.ReasonSyncError, "ServiceAccount "+nsB+"/sa-b may not list pods in namespace "+nsB)
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(nsB).Get(ctx, "related-child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s/related-child: got %v, want NotFound: the hook was called without the related objects", nsB, err)
		}
	})
	t.Run("an account that may not read the children is served none of their namespace", func(t *testing.T) {
		// Its parents are namespaced: the account's reads are checked
		// per namespace as parents are synced, not before it starts.
		waitReady(t, "accounts-c", metav1.ConditionTrue, v1alpha1.ReasonRunning)
		parent := createParent(t, gammas, "Gamma", nsA, "gamma")
		waitEvent(t, parent, engine.ReasonSyncError, "not served in namespace "+nsA,
			"ServiceAccount "+nsA+"/sa-c may not get configmaps in namespace "+nsA+"; list configmaps in namespace "+nsA+"; watch configmaps in namespace "+nsA)
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(nsA).Get(ctx, "gamma-child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s/gamma-child: got %v, want NotFound: the hook was called", nsA, err)
		}
	})
	t.Run("rolling updates need the account to read ControllerRevisions", func(t *testing.T) {
		waitReady(t, "accounts-e", metav1.ConditionTrue, v1alpha1.ReasonRunning)
		parent := createParent(t, epsilons, "Epsilon", nsA, "epsilon")
		waitEvent(t, parent, engine.ReasonSyncError, "ServiceAccount "+nsA+"/sa-a may not get controllerrevisions.metacontroller.k8s.io in namespace "+nsA)
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(nsA).Get(ctx, "epsilon-child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s/epsilon-child: got %v, want NotFound: the hook was called", nsA, err)
		}
	})
	t.Run("an account metactl may not impersonate does not start", func(t *testing.T) {
		c := waitReady(t, "accounts-d", metav1.ConditionFalse, v1alpha1.ReasonForbidden)
		if want := "metactl may not impersonate ServiceAccount " + nsA + "/sa-d"; !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
	})
	t.Run("a credential the account may not get keeps the controller from starting, or stops it", func(t *testing.T) {
		// Account A names B's token: metactl may read it, A may not.
		tokenHook := newRecordingHook(t, true)
		cc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
			"metadata": map[string]any{"name": "accounts-token", "annotations": map[string]any{"metactl.io/service-account": nsA + "/sa-a"}},
			"spec": map[string]any{
				"parentResource":   map[string]any{"apiVersion": etas.GroupVersion().String(), "resource": etas.Resource},
				"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
				"generateSelector": true,
				"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": tokenHook.URL + "/sync",
					"caBundle":      map[string]any{"inline": tokenHook.caPEM()},
					"authorization": map[string]any{"secretRef": map[string]any{"namespace": system, "name": "team-b-token"}}}}},
			},
		}}
		createController(t, v1alpha1.CompositeControllerResource, cc)
		createObject(t, etas, "Eta", nsA, "eta")
		c := waitReady(t, "accounts-token", metav1.ConditionFalse, v1alpha1.ReasonForbidden)
		if want := "ServiceAccount " + nsA + "/sa-a may not get secrets team-b-token in namespace " + system; !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
		if got := tokenHook.received(); len(got) > 0 {
			t.Fatalf("the hook received %d requests (Authorization %q), want none", len(got), got)
		}
		// Granted get on that Secret by name, the controller starts and
		// its hook gets the token.
		applyYAML(t, fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: accounts-test-token, namespace: %[1]s}
rules:
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [team-b-token]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: accounts-test-token, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: accounts-test-token}
subjects: [{kind: ServiceAccount, name: sa-a, namespace: %[2]s}]
`, system, nsA))
		waitReady(t, "accounts-token", metav1.ConditionTrue, v1alpha1.ReasonRunning)
		testenv.Eventually(t, 30*time.Second, "the hook called with the token", func(context.Context) (bool, error) {
			got := tokenHook.received()
			return len(got) > 0 && got[0] == "Bearer team-b-secret-token", nil
		})

		// Revoked, the running controller stops.
		if err := env.Kube.RbacV1().RoleBindings(system).Delete(ctx, "accounts-test-token", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Checked again once per AccountReviewTTL (2s here).
		testenv.Eventually(t, 20*time.Second, "accounts-token Ready=False (Forbidden)", func(context.Context) (bool, error) {
			c = readyCondition(t, "accounts-token")
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonForbidden, nil
		})
		if want := "ServiceAccount " + nsA + "/sa-a may not get secrets team-b-token in namespace " + system; !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not say %q", c.Message, want)
		}
	})
	t.Run("a malformed annotation is an invalid spec", func(t *testing.T) {
		c := waitReady(t, "accounts-bad", metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec)
		if want := "<namespace>/<name>"; !strings.Contains(c.Message, want) {
			t.Errorf("condition message %q does not give the form %q", c.Message, want)
		}
	})
}

// accountRBAC grants ServiceAccount sa-<id> of namespace ns: get, list and
// watch parents (resources of group, comma-separated) and reads everywhere; update and
// patch parents and their status, and every write of writes, in ns only.
// metactlRBAC returns a ClusterRole name with what metactl needs to run
// controllers (their objects, CRDs, Events, SubjectAccessReviews),
// impersonate on the ServiceAccounts named accounts only, and the rules of
// extra (YAML list items); and the ClusterRoleBinding of it to the
// ServiceAccount metactl in namespace system.
func metactlRBAC(name, system string, accounts []string, extra string) (role, binding string) {
	role = fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %s}
rules:
- apiGroups: [metacontroller.k8s.io]
  resources: [compositecontrollers, decoratorcontrollers, compositecontrollers/status, decoratorcontrollers/status, compositecontrollers/finalizers, decoratorcontrollers/finalizers]
  verbs: [get, list, watch, update, patch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch, update]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
- apiGroups: [""]
  resources: [serviceaccounts]
  resourceNames: [%s]
  verbs: [impersonate]
`, name, strings.Join(accounts, ", ")) + strings.TrimPrefix(extra, "\n")
	binding = fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %s}
subjects: [{kind: ServiceAccount, name: metactl, namespace: %s}]
`, name, name, system)
	return role, binding
}

func accountRBAC(id, ns, group, parents string, reads, writes []string) string {
	statuses := strings.ReplaceAll(parents, ",", "/status,") + "/status"
	readRule, writeRule := "", ""
	if len(reads) > 0 {
		readRule = fmt.Sprintf("\n- apiGroups: [\"\"]\n  resources: [%s]\n  verbs: [get, list, watch]", strings.Join(reads, ", "))
	}
	if len(writes) > 0 {
		writeRule = fmt.Sprintf("\n- apiGroups: [\"\"]\n  resources: [%s]\n  verbs: [create, update, patch, delete]", strings.Join(writes, ", "))
	}
	return fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: accounts-test-read-%[1]s}
rules:
- apiGroups: [%[3]s]
  resources: [%[4]s]
  verbs: [get, list, watch]%[5]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: accounts-test-read-%[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: accounts-test-read-%[1]s}
subjects: [{kind: ServiceAccount, name: sa-%[1]s, namespace: %[2]s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: accounts-test-write-%[1]s, namespace: %[2]s}
rules:
- apiGroups: [%[3]s]
  resources: [%[4]s, %[7]s]
  verbs: [update, patch]%[6]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: accounts-test-write-%[1]s, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: accounts-test-write-%[1]s}
subjects: [{kind: ServiceAccount, name: sa-%[1]s, namespace: %[2]s}]
`, id, ns, group, parents, readRule, writeRule, statuses)
}

// testControllers creates CompositeControllers and deletes them when the
// test ends, before the manager stops.
type testControllers struct{ t *testing.T }

func newControllers(t *testing.T) testControllers { return testControllers{t} }

// create creates CompositeController name of parents with children
// childResources (core resources, each with ":<method>" for an update
// strategy), its writes made as account (the annotation's value),
// (none when empty), with a sync hook and, when customize is set, a
// customize hook.
func (c testControllers) create(name, account string, parents schema.GroupVersionResource, sync, customize string, childResources ...string) {
	t := c.t
	t.Helper()
	var childList []any
	for _, r := range childResources {
		r, method, rolling := strings.Cut(r, ":")
		child := map[string]any{"apiVersion": "v1", "resource": r}
		if rolling {
			child["updateStrategy"] = map[string]any{"method": method}
		}
		childList = append(childList, child)
	}
	hooks := map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": sync}}}
	if customize != "" {
		hooks["customize"] = map[string]any{"webhook": map[string]any{"url": customize}}
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"parentResource":   map[string]any{"apiVersion": parents.GroupVersion().String(), "resource": parents.Resource},
			"childResources":   childList,
			"generateSelector": true,
			"hooks":            hooks,
		},
	}}
	if account != "" {
		cc.SetAnnotations(map[string]string{"metactl.io/service-account": account})
	}
	client := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if _, err := client.Create(context.Background(), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting CompositeController %s: %v", name, err)
		}
	})
}

// createParent is createObject, returning the object created.
func createParent(t *testing.T, gvr schema.GroupVersionResource, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	createObject(t, gvr, kind, ns, name)
	obj, err := env.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// waitEvent waits for an Event of reason on obj whose message holds every
// one of want.
func waitEvent(t *testing.T, obj *unstructured.Unstructured, reason string, want ...string) {
	t.Helper()
	var seen []string
	defer func() {
		if t.Failed() {
			t.Logf("events seen: %q", seen)
		}
	}()
	testenv.Eventually(t, 60*time.Second, reason+" Event on "+obj.GetNamespace()+"/"+obj.GetName()+" saying "+strings.Join(want, ", "), func(ctx context.Context) (bool, error) {
		list, err := events(ctx, obj.GetUID())
		if err != nil {
			return false, err
		}
		seen = seen[:0]
	next:
		for _, e := range list {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != reason {
				continue
			}
			for _, w := range want {
				if !strings.Contains(e.Message, w) {
					continue next
				}
			}
			return true, nil
		}
		return false, nil
	})
}

// TestRequireServiceAccount runs metactl with RequireServiceAccount: a
// controller object without the annotation does not run; annotated, it
// runs; its annotation changed to an account that may not read its
// resources, it stops and says so (the annotation is metadata: the
// generation stays).
func TestRequireServiceAccount(t *testing.T) {
	ctx := context.Background()
	ns := env.CreateNamespace(t)
	parents := createCRD(t, "required.test.metactl.io", "things", "Thing")
	applyYAML(t, fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: required-test-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: admin, namespace: %s}]
`, ns))
	runManager(t, manager.Options{Config: env.Config, Workers: 2, RequireServiceAccount: true})
	hook := accountsHook(t)
	newControllers(t).create("required", "", parents, hook.URL+"/configmap", "", "configmaps")
	client := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	annotate := func(account string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"metactl.io/service-account":%q}}}`, account)
		if account == "" {
			patch = `{"metadata":{"annotations":{"metactl.io/service-account":null}}}`
		}
		if _, err := client.Patch(ctx, "required", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("")
	c := waitReady(t, "required", metav1.ConditionFalse, v1alpha1.ReasonForbidden)
	if want := "--require-service-account"; !strings.Contains(c.Message, want) {
		t.Errorf("condition message %q does not name %q", c.Message, want)
	}

	annotate(ns + "/admin")
	waitReady(t, "required", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	createObject(t, parents, "Thing", ns, "one")
	waitObject(t, configMapsGVR, ns, "one-child")

	// Its parents are namespaced: an account that may read none of
	// them is told so on each parent, whose namespace it is not served.
	annotate(ns + "/nobody")
	parent, err := env.Dynamic.Resource(parents).Namespace(ns).Get(ctx, "one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, parent, engine.ReasonSyncError, "ServiceAccount "+ns+"/nobody may not get things.required.test.metactl.io in namespace "+ns)
}
