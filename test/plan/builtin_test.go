package plan

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestPlanBuiltinStatus plans a sync of a built-in object (a ConfigMap)
// whose hook answers a status: the plan shows it going into the
// metactl.io/status annotation, and no change of the object's .status.
func TestPlanBuiltinStatus(t *testing.T) {
	ctx := context.Background()
	metactl := testenv.BuildMetactl(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"phase": "Checked"}})
	}))
	t.Cleanup(hook.Close)
	ns := env.CreateNamespace(t)
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "plan-builtin-status"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "plan-builtin-status"}}}},
			"hooks":     map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
		},
	}}
	if _, err := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource).Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.DecoratorControllerResource).Delete(context.Background(), dc.GetName(), metav1.DeleteOptions{})
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"decorate": "plan-builtin-status"}}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := plan(t, metactl, "configmaps/c", "-n", ns)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "metactl.io/status") || !strings.Contains(out, "Checked") {
		t.Errorf("the plan does not show the status going into the metactl.io/status annotation:\n%s", out)
	}
	if strings.Contains(out, ".status") {
		t.Errorf("the plan shows a change of the ConfigMap's .status:\n%s", out)
	}
}
