//go:build integration

package manager_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestSyncedConditionAnnotationAndOption: a controller object annotated
// metactl.io/synced-condition: "true" after it started is restarted, and
// its objects then carry the Synced condition, which they did not before;
// a manager with Options.SyncedCondition writes it for an unannotated
// controller, and not for one annotated "false".
func TestSyncedConditionAnnotationAndOption(t *testing.T) {
	ctx := context.Background()
	applyWidgetsCRD(t)
	stop := runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond})
	hook := newHook(t, "synced")
	const name = "synced-widgets"
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	widgetController(t, name, hook.URL)

	ns := env.CreateNamespace(t)
	newWidget := func(w string) { newWidget(t, ns, name, w) }
	synced := func(o *unstructured.Unstructured) map[string]any {
		list, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range list {
			if m, ok := c.(map[string]any); ok && m["type"] == engine.SyncedConditionType {
				return m
			}
		}
		return nil
	}
	tagged := func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		tag, _, _ := unstructured.NestedString(o.Object, "status", "tag")
		return tag == "synced"
	}
	newWidget("w1")
	if o := controllertest.WaitFor(t, env, widgetsGVR, ns, "w1", "the hook's status", tagged); synced(o) != nil {
		t.Fatalf("Synced condition without the annotation: %v", synced(o))
	}

	annotate := func(value string) { annotateController(t, name, engine.SyncedConditionAnnotation, value) }
	annotate("true")
	controllertest.EventMessage(t, env, "", name, "Stopped", "annotation "+engine.SyncedConditionAnnotation+" changed")
	controllertest.WaitFor(t, env, widgetsGVR, ns, "w1", "Synced=True after the annotation", func(o *unstructured.Unstructured) bool {
		c := synced(o)
		return c != nil && c["status"] == "True"
	})

	// The option, for a controller annotated "false" and one without.
	stop()
	annotate("false")
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond, SyncedCondition: true})
	newWidget("w2")
	if o := controllertest.WaitFor(t, env, widgetsGVR, ns, "w2", "the hook's status", tagged); synced(o) != nil {
		t.Errorf("Synced condition with the annotation false: %v", synced(o))
	}
	if _, err := ccs.Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/annotations"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	newWidget("w3")
	controllertest.WaitFor(t, env, widgetsGVR, ns, "w3", "Synced=True under the option", func(o *unstructured.Unstructured) bool {
		return o != nil && synced(o) != nil && synced(o)["status"] == "True"
	})
}
