//go:build integration

package decorator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
)

// secretAttachment is a desired Secret attachment of obj.
func secretAttachment(obj *unstructured.Unstructured) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": obj.GetName() + "-secret"},
		"stringData": map[string]any{"of": obj.GetName()},
	}
}

// decorateWithSecret starts a decorator of the test's ConfigMaps with a
// Secret attachment, edited by edit, and a target ConfigMap; it returns the
// hook and the Secret once attached.
func decorateWithSecret(t *testing.T, ns string, edit ...func(*unstructured.Unstructured)) (*hook, *unstructured.Unstructured) {
	t.Helper()
	h := newHook(t, func(req *request) any {
		return map[string]any{"labels": map[string]any{"decorated": "yes"}, "attachments": []any{secretAttachment(req.Object)}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}},
		syncHook(h), edit...)
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)
	waitFor(t, configMapsGVR, ns, "target", "decorated", func(o *unstructured.Unstructured) bool { return o != nil && o.GetLabels()["decorated"] == "yes" })
	secret := waitFor(t, secretsGVR, ns, "target-secret", "attached", exists)
	return h, secret
}

func exists(o *unstructured.Unstructured) bool { return o != nil }
func gone(o *unstructured.Unstructured) bool   { return o == nil }

// poke changes the target ConfigMap, which syncs it.
func poke(t *testing.T, ns, value string) {
	t.Helper()
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", types.MergePatchType, []byte(`{"data":{"poke":"`+value+`"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestAnswerWithoutAttachmentsIsRefused: an answer whose attachments key is
// misspelt is refused whole (no attachment deleted, no label changed) with
// a SyncError saying what to answer instead, and the key is reported with
// the one it most likely misspells.
func TestAnswerWithoutAttachmentsIsRefused(t *testing.T) {
	ns := env.CreateNamespace(t)
	h, secret := decorateWithSecret(t, ns)
	calls := h.calls.Load()
	h.setAnswer(func(req *request) any {
		return map[string]any{"labels": map[string]any{"decorated": "changed"}, "attachment": []any{secretAttachment(req.Object)}}
	})
	poke(t, ns, "1")
	msg := controllertest.EventMessage(t, env, ns, "target", "SyncError", `answers "attachments": []`)
	want := "decoratorcontroller " + testName(t) + `: sync hook answer refused: it has no "attachments" list (it has "attachment" (did you mean "attachments"?))`
	if !strings.HasPrefix(msg, want) || !strings.Contains(msg, engine.AbsentAttachmentsAnnotation+"=empty") {
		t.Errorf("SyncError %q, want it to start with %q and name the annotation", msg, want)
	}
	unknown := controllertest.EventMessage(t, env, ns, "target", "UnknownAnswerField", `"attachment"`)
	if want := "decoratorcontroller " + testName(t) + `: the sync hook answered with unknown key "attachment" (did you mean "attachments"?)`; !strings.HasPrefix(unknown, want) {
		t.Errorf("UnknownAnswerField %q, want it to start with %q", unknown, want)
	}
	testenv.Eventually(t, 30*time.Second, "a retry", func(context.Context) (bool, error) { return h.calls.Load() >= calls+2, nil })
	after, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx(t), "target-secret", metav1.GetOptions{})
	if err != nil || after.GetResourceVersion() != secret.GetResourceVersion() {
		t.Fatalf("the attachment was deleted or written after a refused answer: %v", err)
	}
	target, _ := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), "target", metav1.GetOptions{})
	if got := target.GetLabels()["decorated"]; got != "yes" {
		t.Errorf("label decorated = %q after a refused answer, want yes", got)
	}

	// "attachments": [] deletes them.
	h.setAnswer(func(*request) any {
		return map[string]any{"labels": map[string]any{"decorated": "none"}, "attachments": []any{}}
	})
	poke(t, ns, "2")
	waitFor(t, secretsGVR, ns, "target-secret", "deleted", gone)
}

// TestAbsentAttachmentsAnnotation: with metactl.io/absent-attachments=empty
// an answer without attachments means none, as in metacontroller.
func TestAbsentAttachmentsAnnotation(t *testing.T) {
	ns := env.CreateNamespace(t)
	h, _ := decorateWithSecret(t, ns, func(o *unstructured.Unstructured) {
		o.SetAnnotations(map[string]string{engine.AbsentAttachmentsAnnotation: engine.AbsentListEmpty})
	})
	h.setAnswer(func(*request) any { return map[string]any{"labels": map[string]any{"decorated": "bare"}} })
	poke(t, ns, "1")
	waitFor(t, secretsGVR, ns, "target-secret", "deleted", gone)
	waitFor(t, configMapsGVR, ns, "target", "relabelled", func(o *unstructured.Unstructured) bool { return o.GetLabels()["decorated"] == "bare" })
}
