//go:build integration

package manager_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestCustomizeHookAuthErrorCondition: the customize hook is called
// through the controller's hook caller, so that its credential errors set
// Ready=False HookAuthError, as the sync hook's do.
func TestCustomizeHookAuthErrorCondition(t *testing.T) {
	// The hook is plain http, its token in the test's namespace.
	runManager(t, manager.Options{Config: env.Config, Workers: 2, CredentialNamespaces: []string{"*"}, AllowInsecureCredentials: true})
	ctx := context.Background()
	ns := env.CreateNamespace(t)
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"children": [], "relatedResources": []}`))
	}))
	t.Cleanup(h.Close)
	cc := compositeController("customize-authed", h.URL)
	spec := cc.Object["spec"].(map[string]any)
	spec["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "configmaps"}
	spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}
	spec["hooks"].(map[string]any)["customize"] = map[string]any{"webhook": map[string]any{"url": h.URL,
		"authorization": map[string]any{"type": "Bearer", "secretRef": map[string]any{"name": "customize-token", "namespace": ns}}}}
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ccs.Delete(context.Background(), "customize-authed", metav1.DeleteOptions{}) })
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "parent", "namespace": ns}}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := waitReady(t, "customize-authed", metav1.ConditionFalse, v1alpha1.ReasonHookAuthError)
	if !strings.Contains(c.Message, "customize") || !strings.Contains(c.Message, ns+"/customize-token") {
		t.Errorf("condition message %q does not name the customize hook and its Secret", c.Message)
	}
}
