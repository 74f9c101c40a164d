//go:build integration

package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// namespacesHook answers a ConfigMap <parent>-child for each parent, and
// records the namespace of every parent it was sent.
type namespacesHook struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newNamespacesHook(t *testing.T) *namespacesHook {
	h := &namespacesHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Parent == nil {
			http.Error(w, "no parent", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.seen = append(h.seen, req.Parent.GetNamespace())
		h.mu.Unlock()
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": req.Parent.GetName() + "-child"}}
		_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{child}})
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *namespacesHook) namespaces() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// TestAccountReadsPerNamespace runs a controller of namespaced parents as
// an account granted only a Role in its own namespace (no ClusterRole):
// it starts, syncs the parents of that namespace, and is served nothing
// of another namespace: a parent there fails its sync, saying what the
// account may not read, and its hook never receives it; once the account
// is granted that namespace too, the parent there is synced.
func TestAccountReadsPerNamespace(t *testing.T) {
	ctx := context.Background()
	system, nsA, nsB := env.CreateNamespace(t), env.CreateNamespace(t), env.CreateNamespace(t)
	const group = "reads.test.metactl.io"
	nus := createCRD(t, group, "nus", "Nu")
	role, binding := metactlRBAC("reads-test-metactl", system, []string{"sa-r"}, `
- apiGroups: [`+group+`]
  resources: [nus, nus/status]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
`)
	applyYAML(t, role, binding, accountRole(nsA, nsA, group))
	if _, err := env.Kube.CoreV1().ServiceAccounts(nsA).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa-r"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The account's answers hold 2 s, so that the grant below is seen soon.
	runManager(t, manager.Options{Config: serviceAccountConfig(t, system, "metactl"), Workers: 2, AccountReviewTTL: 2 * time.Second})
	hook := newNamespacesHook(t)
	newControllers(t).create("reads", nsA+"/sa-r", nus, hook.URL, "", "configmaps")

	waitReady(t, "reads", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	createObject(t, nus, "Nu", nsA, "inside")
	waitObject(t, configMapsGVR, nsA, "inside-child")

	outside := createParent(t, nus, "Nu", nsB, "outside")
	waitEvent(t, outside, engine.ReasonSyncError, "not served in namespace "+nsB,
		"ServiceAccount "+nsA+"/sa-r may not get nus."+group+" in namespace "+nsB, "list configmaps in namespace "+nsB)
	if got := hook.namespaces(); slices.Contains(got, nsB) {
		t.Errorf("the hook was sent a parent of namespace %s, which the account may not read (namespaces sent: %q)", nsB, got)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(nsB).Get(ctx, "outside-child", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap %s/outside-child: got %v, want NotFound", nsB, err)
	}

	// Granted namespace B too, the parent there is synced (its retry
	// asks again once the answer's 2 s are over).
	applyYAML(t, accountRole(nsA, nsB, group))
	waitObject(t, configMapsGVR, nsB, "outside-child")
}

// accountRole grants ServiceAccount sa-r of namespace account, in
// namespace ns only, what its controller does there: read and write nus
// and their status, and ConfigMaps.
func accountRole(account, ns, group string) string {
	return fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reads-test-account, namespace: %[2]s}
rules:
- apiGroups: [%[3]s]
  resources: [nus, nus/status]
  verbs: [get, list, watch, update, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reads-test-account, namespace: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reads-test-account}
subjects: [{kind: ServiceAccount, name: sa-r, namespace: %[1]s}]
`, account, ns, group)
}
