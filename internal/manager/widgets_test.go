//go:build integration

package manager_test

import (
	"context"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// applyWidgetsCRD installs the Widget CRD (testdata/widgets-crd.yaml); it
// stays for the package's later tests.
func applyWidgetsCRD(t *testing.T) {
	t.Helper()
	root, _ := testenv.RepoRoot()
	if _, err := env.Kubectl(context.Background(), "apply", "-f", filepath.Join(root, "internal", "manager", "testdata", "widgets-crd.yaml")); err != nil {
		t.Fatal(err)
	}
}

// widgetController creates the CompositeController name, calling hookURL,
// for the Widgets labelled test=name only (newWidget), deletes it when the
// test ends, and returns once it runs.
func widgetController(t *testing.T, name, hookURL string) {
	t.Helper()
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	cc := compositeController(name, hookURL)
	cc.Object["spec"].(map[string]any)["parentResource"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{"test": name}}
	if _, err := ccs.Create(context.Background(), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ccs.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
}

// annotateController sets annotation key to value on the
// CompositeController name.
func annotateController(t *testing.T, name, key, value string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`)
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// newWidget creates the Widget w in ns, labelled test=controller, so that
// widgetController(controller) selects it.
func newWidget(t *testing.T, ns, controller, w string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": w, "namespace": ns, "labels": map[string]any{"test": controller}}}}
	if _, err := env.Dynamic.Resource(widgetsGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
