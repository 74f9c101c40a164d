//go:build integration

package decorator_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
)

// readyCondition returns the Ready condition of obj's status, nil when none.
func readyCondition(obj *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m
		}
	}
	return nil
}

// TestDecoratorAnswerEventsAndConditions: a decorator's answer records its
// Events on the decorated object, as the hook wrote them, and gets the
// conditions of its status completed, settling in two calls.
func TestDecoratorAnswerEventsAndConditions(t *testing.T) {
	name := testName(t)
	var calls atomic.Int64
	h := newHook(t, func(req *request) any {
		return map[string]any{
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Decorated"}}},
			"events": []any{
				map[string]any{"type": "Warning", "reason": "QuotaLow", "message": "90% used"},
				map[string]any{"reason": "Called", "message": fmt.Sprintf("call %d", calls.Add(1))},
			},
		}
	})
	start(t, []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}}, nil, syncHook(h))
	createClusterThing(t, name)
	obj := waitFor(t, clusterThingsGVR, "", name, "a Ready condition", func(o *unstructured.Unstructured) bool { return readyCondition(o) != nil })
	if c := readyCondition(obj); c["lastTransitionTime"] == nil || c["observedGeneration"] != obj.GetGeneration() {
		t.Errorf("Ready = %v: want lastTransitionTime and observedGeneration %d filled", c, obj.GetGeneration())
	}
	// A cluster-scoped object's Events are in the default namespace.
	// They are recorded in order: once the second call's is there, the
	// sync's are all there.
	controllertest.EventMessage(t, env, metav1.NamespaceDefault, name, "Called", "call 2")
	msg := controllertest.EventMessage(t, env, metav1.NamespaceDefault, name, "QuotaLow", "used")
	if msg != "90% used" {
		t.Errorf("QuotaLow message %q, want the hook's as it is", msg)
	}
	events, err := env.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=QuotaLow"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 {
		t.Fatalf("%d QuotaLow Events, want 1", len(events.Items))
	}
	if e := events.Items[0]; e.Type != corev1.EventTypeWarning || e.Count != 1 {
		t.Errorf("QuotaLow Event: type %s, count %d; want Warning, recorded once for the two calls of one sync", e.Type, e.Count)
	}
	if got := h.calls.Load(); got != 2 {
		t.Errorf("hook calls = %d, want 2 (the conditions, the same again: the fixed point)", got)
	}
	if got := controllertest.Unsettled(name); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0", got)
	}
}

// TestDecoratorInvalidEventRefusesTheAnswer: an answer with an invalid
// event is refused whole: its labels are not written.
func TestDecoratorInvalidEventRefusesTheAnswer(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		return map[string]any{"labels": map[string]any{"decorated": "yes"},
			"events": []any{map[string]any{"type": "Warning", "reason": "Two words"}}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}}, nil, syncHook(h))
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)
	controllertest.EventMessage(t, env, ns, "target", "SyncError", `events[0].reason "Two words": must have no white space`)
	obj, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetLabels()["decorated"] != "" {
		t.Error("the refused answer's label was written")
	}
}
