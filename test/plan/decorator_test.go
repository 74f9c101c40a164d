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

// TestPlanDecorator plans a DecoratorController's sync of a ConfigMap
// never synced: a label on the ConfigMap and a Secret attachment to
// create, whose data the plan does not show.
func TestPlanDecorator(t *testing.T) {
	ctx := context.Background()
	metactl := testenv.BuildMetactl(t)
	const secret = "s3cr3t-value"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Object *unstructured.Unstructured `json:"object"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"labels": map[string]any{"decorated": "yes"},
			"attachments": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": req.Object.GetName() + "-token"},
				"stringData": map[string]any{"token": secret},
			}},
		})
	}))
	t.Cleanup(hook.Close)
	ns := env.CreateNamespace(t)
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "plan-decorator"},
		"spec": map[string]any{
			"resources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "plan-decorator"}}}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
			"hooks":       map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
		},
	}}
	if _, err := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource).Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.DecoratorControllerResource).Delete(context.Background(), "plan-decorator", metav1.DeleteOptions{})
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"decorate": "plan-decorator"}}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := plan(t, metactl, "configmaps/c", "-n", ns)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"DecoratorController plan-decorator, for ConfigMap " + ns + "/c",
		"Secret " + ns + "/c-token: create",
		`+ .metadata.labels.decorated: "yes"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	jsonOut, errOut, code := plan(t, metactl, "configmaps/c", "-n", ns, "-o", "json")
	if code != 2 {
		t.Fatalf("-o json: exit %d, want 2\n%s%s", code, jsonOut, errOut)
	}
	for _, o := range []string{out, jsonOut} {
		if strings.Contains(o, secret) || strings.Contains(o, "czNjcjN0LXZhbHVl") {
			t.Errorf("the plan shows the Secret's data:\n%s", o)
		}
	}
}
