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

// TestPlanRelated: the related objects come through the customize hook,
// as metactl run gets them, here at --customize-hook-url (the controller
// names an address where nothing answers).
func TestPlanRelated(t *testing.T) {
	ctx := context.Background()
	metactl := testenv.BuildMetactl(t)
	ns := env.CreateNamespace(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/customize" {
			_ = json.NewEncoder(w).Encode(map[string]any{"relatedResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"related": "plan-related"}},
			}}})
			return
		}
		var req struct {
			Related map[string]map[string]any `json:"related"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"related": len(req.Related["ConfigMap.v1"])}, "children": []any{}})
	}))
	t.Cleanup(hook.Close)
	cc := controllerObject("plan-related", hook.URL)
	_ = unstructured.SetNestedMap(cc.Object, map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/customize"}}, "spec", "hooks", "customize")
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), "plan-related", metav1.DeleteOptions{})
	})
	for _, name := range []string{"rel-1", "rel-2"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"related": "plan-related"}}}
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Dynamic.Resource(helloGVR).Namespace(ns).Create(ctx, parentObject(ns, "p", "plan-related", "World"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := plan(t, metactl, "helloworlds/p", "-n", ns, "--customize-hook-url", hook.URL+"/customize")
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"1 customize, 2 sync; settled", "+ .status.related: 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
}
