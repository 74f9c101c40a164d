//go:build integration

package manager_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestRecordAnnotation: a running controller annotated metactl.io/record:
// "true" is restarted and its hook calls are recorded from then on, none
// before; an invalid value makes the spec invalid; "false" stops the
// recording and drops what was recorded.
func TestRecordAnnotation(t *testing.T) {
	applyWidgetsCRD(t)
	rec := hookrecord.NewRecorder(hookrecord.RecorderOptions{})
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond, Record: rec})
	hook := newHook(t, "recorded")
	const name = "recorded-widgets"
	id := "compositecontroller/" + name
	widgetController(t, name, hook.URL)

	ns := env.CreateNamespace(t)
	create := func(w string) {
		newWidget(t, ns, name, w)
		controllertest.WaitFor(t, env, widgetsGVR, ns, w, "the hook's status", func(o *unstructured.Unstructured) bool {
			if o == nil {
				return false
			}
			tag, _, _ := unstructured.NestedString(o.Object, "status", "tag")
			return tag == "recorded"
		})
	}
	annotate := func(value string) { annotateController(t, name, engine.RecordAnnotation, value) }

	create("w1")
	if calls, ok := rec.Calls(id); ok || len(calls) > 0 {
		t.Fatalf("%d calls recorded without the annotation", len(calls))
	}
	annotate("true")
	controllertest.EventMessage(t, env, "", name, "Stopped", "annotation "+engine.RecordAnnotation+" changed")
	create("w2")
	testenv.Eventually(t, 30*time.Second, "a recorded call about w2", func(context.Context) (bool, error) {
		calls, _ := rec.Calls(id)
		for _, c := range calls {
			if c.Object == ns+"/w2" && c.Hook == "sync" && c.Code == 200 {
				return true, nil
			}
		}
		return false, nil
	})

	annotate("yes")
	if c := waitReady(t, name, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec); c == nil {
		t.Fatal("no Ready condition")
	}
	annotate("false")
	waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	testenv.Eventually(t, 30*time.Second, "the recorded calls dropped", func(context.Context) (bool, error) {
		calls, ok := rec.Calls(id)
		return !ok && len(calls) == 0, nil
	})
}
