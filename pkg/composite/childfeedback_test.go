//go:build integration

package composite_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// eventsWithReason lists the Events with reason on the object named
// objName, once every Event recorded before now has reached the API
// server: the test recorder records a marker Event after them and waits
// for it (the recorder writes its Events in order).
func eventsWithReason(t *testing.T, parent *unstructured.Unstructured, reason string) []corev1.Event {
	t.Helper()
	marker := fmt.Sprintf("marker %d", time.Now().UnixNano())
	recorder.Event(parent, corev1.EventTypeNormal, "TestMarker", marker)
	waitForEvent(t, parent.GetNamespace(), parent.GetName(), "TestMarker", marker)
	list, err := env.Kube.CoreV1().Events(parent.GetNamespace()).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + parent.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// countOf sums the counts of events (the recorder counts a repeated Event
// on the first one).
func countOf(events []corev1.Event) int32 {
	var n int32
	for _, e := range events {
		n += max(e.Count, 1)
	}
	return n
}

// An OnDelete child that differs from what the hook asks is reported once
// on the parent, not at every sync; a new desired state is reported again.
func TestOnDeleteDriftIsReportedOnce(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		value, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "value")
		other, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "other")
		return map[string]any{
			"status":   map[string]any{"value": value, "other": other},
			"children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"value": value})},
		}
	})
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}} // OnDelete by default
	}))
	parent := newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "one"})
	waitFor(t, configMapsGVR, ns, "p1-cm", "created", exists)
	if got := eventsWithReason(t, parent, children.ReasonChildNotUpdated); len(got) != 0 {
		t.Fatalf("a child as the hook asks is reported: %v", got[0].Message)
	}

	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "two"})
	waitForEvent(t, ns, "p1", children.ReasonChildNotUpdated, "ConfigMap p1-cm")
	// Syncs that ask for the same child again say nothing more.
	for _, other := range []string{"a", "b", "c"} {
		setSpec(t, thingsGVR, ns, "p1", map[string]any{"other": other})
		waitFor(t, thingsGVR, ns, "p1", "synced with other="+other, func(o *unstructured.Unstructured) bool { return statusField(o, "other") == other })
	}
	events := eventsWithReason(t, parent, children.ReasonChildNotUpdated)
	if n := countOf(events); n != 1 {
		t.Fatalf("the OnDelete child is reported %d times, want once", n)
	}
	e := events[0]
	for _, want := range []string{"ConfigMap p1-cm", "OnDelete", "updateStrategy: {method: InPlace}", "configmaps"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("Event message %q does not contain %q", e.Message, want)
		}
	}
	if e.Type != corev1.EventTypeNormal {
		t.Errorf("Event type %s, want Normal", e.Type)
	}
	if got, _ := get(t, configMapsGVR, ns, "p1-cm"); dataValue(got) != "one" {
		t.Errorf("OnDelete child changed to %q", dataValue(got))
	}

	// Another desired state is another report.
	setSpec(t, thingsGVR, ns, "p1", map[string]any{"value": "three"})
	waitFor(t, thingsGVR, ns, "p1", "synced with value three", func(o *unstructured.Unstructured) bool { return statusField(o, "value") == "three" })
	if n := countOf(eventsWithReason(t, parent, children.ReasonChildNotUpdated)); n != 2 {
		t.Errorf("after a new desired state the OnDelete child is reported %d times, want 2", n)
	}
}

// The API server's warning on a child write (an unknown field it drops)
// is a Warning Event on the parent naming the child and the field, once.
func TestChildWriteWarningIsReported(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		other, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "other")
		labels := map[string]any{"parent": req.Parent.GetName()}
		return map[string]any{
			"status": map[string]any{"other": other},
			"children": []any{map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "Deployment",
				"metadata":   map[string]any{"name": req.Parent.GetName() + "-web", "labels": labels},
				"spec": map[string]any{
					"replcas":  int64(3), // the typo
					"selector": map[string]any{"matchLabels": labels},
					"template": map[string]any{
						"metadata": map[string]any{"labels": labels},
						"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
					},
				},
			}},
		}
	})
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "apps/v1", "resource": "deployments", "updateStrategy": map[string]any{"method": "InPlace"}}}
	}))
	parent := newThing(t, thingsGVR, ns, "p1", nil)
	waitFor(t, deploymentsGVR, ns, "p1-web", "created", exists)
	waitForEvent(t, ns, "p1", children.ReasonChildWriteWarning, `unknown field "spec.replcas"`)

	for _, other := range []string{"a", "b"} {
		setSpec(t, thingsGVR, ns, "p1", map[string]any{"other": other})
		waitFor(t, thingsGVR, ns, "p1", "synced with other="+other, func(o *unstructured.Unstructured) bool { return statusField(o, "other") == other })
	}
	events := eventsWithReason(t, parent, children.ReasonChildWriteWarning)
	if n := countOf(events); n != 1 {
		t.Errorf("the warning is reported %d times, want once", n)
	}
	e := events[0]
	if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "Deployment p1-web") {
		t.Errorf("Event %s %q, want a Warning naming Deployment p1-web", e.Type, e.Message)
	}
	// The update that puts back the field the server drops changes
	// nothing (same resourceVersion): it does not call the hook again, so
	// every sync settles.
	if got := controllertest.Unsettled(testLabel(t)); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0", got)
	}
}
