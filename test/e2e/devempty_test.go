package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestDevWithoutExample: `metactl dev` without --example gives a cluster
// with the metacontroller CRDs, no controller of its own, and metactl
// running: a CompositeController the user applies, with a hook on this
// machine, runs at once. Its log (at -v=1 here) holds envtest's lines,
// through klog, and never controller-runtime's warning, with a goroutine
// stack, that no logger was set.
func TestDevWithoutExample(t *testing.T) {
	d := startDev(t, "-v=1")
	d.waitLine(t, 3*time.Minute, "metactl is running")
	d.recordProcesses(t, clusterProcesses...)
	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(d.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ccs := client.Resource(v1alpha1.CompositeControllerResource)
	list, err := ccs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing CompositeControllers (are the CRDs installed?): %v", err)
	}
	if len(list.Items) != 0 {
		t.Errorf("metactl dev without --example has %d CompositeControllers, want none", len(list.Items))
	}

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": req.Parent.GetName() + "-mine"},
			"data":     map[string]any{"from": req.Parent.GetName()},
		}}})
	}))
	t.Cleanup(hook.Close)
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "mine"},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": "v1", "resource": "secrets",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"mine": "yes"}}},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
			"generateSelector": true,
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
		},
	}}
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "p1", "namespace": "default", "labels": map[string]any{"mine": "yes"}}}}
	if _, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace("default").Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the controller's child in metactl dev's cluster", func(ctx context.Context) (bool, error) {
		if d.exited() {
			t.Fatalf("metactl dev exited: %v", d.err)
		}
		cm, err := client.Resource(configmapsGVR).Namespace("default").Get(ctx, "p1-mine", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(cm)
		return ref != nil && ref.Name == "p1" && nestedString(cm, "data", "from") == "p1", nil
	})

	d.interrupt(t, time.Minute)
	d.checkNothingLeft(t, 15*time.Second)
	stderr := d.stderr.String()
	if !strings.Contains(stderr, "starting control plane") {
		t.Error("metactl dev -v=1 did not log envtest's \"starting control plane\": controller-runtime's log does not reach klog")
	}
	if i := strings.Index(stderr, "log.SetLogger("); i >= 0 {
		t.Errorf("metactl dev printed controller-runtime's warning that no logger was set:\n%s", stderr[i:min(len(stderr), i+2000)])
	}
}
