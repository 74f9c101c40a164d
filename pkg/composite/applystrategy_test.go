//go:build integration

package composite_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/pkg/composite"
)

// TestRunningControllerRepairsDrift: under either apply strategy, a
// running controller puts back a field of a child that someone else
// edited, the edit's watch event being enough to sync the parent.
func TestRunningControllerRepairsDrift(t *testing.T) {
	for _, strategy := range []engine.ApplyStrategy{engine.ApplyClientSide, engine.ApplyServerSide} {
		t.Run(string(strategy), func(t *testing.T) {
			ns := env.CreateNamespace(t)
			hook := newTestHook(t, valueHook)
			cc := compositeController(t, hook, thingsGVR, nil)
			startController(t, cc, func(o *composite.Options) { o.ApplyStrategy = strategy })
			newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "v1"})
			waitFor(t, configMapsGVR, ns, "p1-cm", "created", func(o *unstructured.Unstructured) bool {
				return o != nil && dataValue(o) == "v1"
			})
			if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "p1-cm", "application/merge-patch+json",
				[]byte(`{"data":{"value":"edited"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, configMapsGVR, ns, "p1-cm", "put back", func(o *unstructured.Unstructured) bool {
				return o != nil && dataValue(o) == "v1"
			})
		})
	}
}
