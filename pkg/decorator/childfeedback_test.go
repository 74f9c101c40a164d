//go:build integration

package decorator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

// eventsOn returns the Events on obj with reason once every Event recorded
// before the call has reached the API server (the recorder writes in
// order: a marker recorded after them is waited for).
func eventsOn(t *testing.T, obj *unstructured.Unstructured, reason string) []corev1.Event {
	t.Helper()
	marker := fmt.Sprintf("marker %d", time.Now().UnixNano())
	recorder.Event(obj, corev1.EventTypeNormal, "TestMarker", marker)
	var out []corev1.Event
	testenv.Eventually(t, 30*time.Second, "the marker Event on "+obj.GetName(), func(ctx context.Context) (bool, error) {
		list, err := env.Kube.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + obj.GetName()})
		if err != nil {
			return false, err
		}
		out = nil
		marked := false
		for _, e := range list.Items {
			marked = marked || e.Message == marker
			if e.Reason == reason {
				out = append(out, e)
			}
		}
		return marked, nil
	})
	return out
}

// An attachment's write warnings and its OnDelete drift are Events on the
// decorated object, each once, calling it an attachment.
func TestAttachmentWarningsAndOnDeleteDrift(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		return map[string]any{"annotations": map[string]any{"other": req.Object.GetLabels()["other"]}, "attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": req.Object.GetName() + "-att"},
			"data":     map[string]any{"value": req.Object.GetLabels()["value"]},
			"dat":      map[string]any{"typo": "yes"},
		}}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}}, // OnDelete by default
		syncHook(h))
	target := createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t), "value": "one"}, nil)
	waitFor(t, configMapsGVR, ns, "target-att", "created", func(o *unstructured.Unstructured) bool { return o != nil })

	testenv.Eventually(t, 30*time.Second, "a ChildWriteWarning Event naming the field", func(ctx context.Context) (bool, error) {
		for _, e := range eventsOn(t, target, children.ReasonChildWriteWarning) {
			if strings.Contains(e.Message, `unknown field "dat"`) && strings.Contains(e.Message, "attachment ConfigMap target-att") {
				return true, nil
			}
		}
		return false, nil
	})
	if got := eventsOn(t, target, children.ReasonChildNotUpdated); len(got) != 0 {
		t.Fatalf("an attachment as the hook asks is reported: %s", got[0].Message)
	}

	patch := []byte(`{"metadata":{"labels":{"value":"two"}}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var kept []corev1.Event
	testenv.Eventually(t, 30*time.Second, "a ChildNotUpdated Event", func(ctx context.Context) (bool, error) {
		kept = eventsOn(t, target, children.ReasonChildNotUpdated)
		return len(kept) > 0, nil
	})
	// Another sync asking for the same attachment says nothing more.
	patch = []byte(`{"metadata":{"labels":{"other":"x"}}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The annotation is written after the attachments: that sync is over.
	waitFor(t, configMapsGVR, ns, "target", "synced with other=x", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetAnnotations()["other"] == "x"
	})
	kept = eventsOn(t, target, children.ReasonChildNotUpdated)
	if len(kept) != 1 || kept[0].Count > 1 {
		t.Fatalf("the OnDelete attachment is reported %d times (counts %v), want once", len(kept), kept)
	}
	if msg := kept[0].Message; !strings.Contains(msg, "attachment ConfigMap target-att") || !strings.Contains(msg, "OnDelete") {
		t.Errorf("Event message %q does not name the attachment and its strategy", msg)
	}
	if got := eventsOn(t, target, children.ReasonChildWriteWarning); len(got) != 1 || got[0].Count > 1 {
		t.Errorf("the warning is reported %d times, want once", len(got))
	}
}
