//go:build integration

package manager_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
)

// TestApplyStrategyAnnotation (in a file named to run after TestLifecycle,
// which needs the Widget CRD absent at first): a controller without the
// annotation writes its children client-side (last-applied annotation);
// annotated metactl.io/apply-strategy: server-side-apply (metacontroller's
// name) after it started, it is restarted and applies them server-side as
// metactl/<controller>, without the annotation; an unknown value makes the
// spec invalid.
func TestApplyStrategyAnnotation(t *testing.T) {
	applyWidgetsCRD(t)
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond})
	hook := newHook(t, "strategy")
	const name = "strategy-widgets"
	widgetController(t, name, hook.URL)
	ns := env.CreateNamespace(t)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	serverSide := func(o *unstructured.Unstructured) bool {
		for _, e := range o.GetManagedFields() {
			if e.Manager == engine.FieldManagerPrefix+name && e.Operation == metav1.ManagedFieldsOperationApply {
				return true
			}
		}
		return false
	}
	lastApplied := func(o *unstructured.Unstructured) bool {
		_, ok := o.GetAnnotations()[apply.LastAppliedAnnotation]
		return ok
	}

	newWidget(t, ns, name, "w1")
	if o := controllertest.WaitFor(t, env, configMaps, ns, "w1-strategy", "the child of w1", func(o *unstructured.Unstructured) bool { return o != nil }); serverSide(o) || !lastApplied(o) {
		t.Fatalf("without the annotation: child applied server-side %v, last-applied annotation %v; want client-side", serverSide(o), lastApplied(o))
	}

	annotateController(t, name, engine.ApplyStrategyAnnotation, "server-side-apply")
	controllertest.EventMessage(t, env, "", name, "Stopped", "annotation "+engine.ApplyStrategyAnnotation+" changed")
	newWidget(t, ns, name, "w2")
	if o := controllertest.WaitFor(t, env, configMaps, ns, "w2-strategy", "the child of w2", func(o *unstructured.Unstructured) bool { return o != nil }); !serverSide(o) || lastApplied(o) {
		t.Errorf("annotated server-side-apply: child applied server-side %v, last-applied annotation %v; want server-side", serverSide(o), lastApplied(o))
	}

	annotateController(t, name, engine.ApplyStrategyAnnotation, "kubectl")
	if c := waitReady(t, name, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec); c == nil {
		t.Fatal("no Ready condition")
	}
	annotateController(t, name, engine.ApplyStrategyAnnotation, "client-side")
	waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
}
