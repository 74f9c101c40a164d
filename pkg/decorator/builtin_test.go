//go:build integration

package decorator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
)

// TestDecoratedBuiltInObject: a decorator's hook is given a built-in
// object as it is, its real status included (as metacontroller gives it);
// the status the hook answers is kept in the metactl.io/status annotation,
// never in the object's status, and written once however often the object
// is resynced.
func TestDecoratedBuiltInObject(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []any // object.status of each call
	)
	h := newHook(t, func(req *request) any {
		mu.Lock()
		seen = append(seen, req.Object.Object["status"])
		mu.Unlock()
		phase, _, _ := unstructured.NestedString(req.Object.Object, "status", "phase")
		return map[string]any{"status": map[string]any{"phaseSeen": phase}}
	})
	c := start(t, []any{map[string]any{"apiVersion": "v1", "resource": "namespaces",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}}, nil, syncHook(h), func(obj *unstructured.Unstructured) {
		obj.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
	})
	writes0 := controllertest.Writes(c.Name(), "patch", "status")
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": "decorated-", "labels": map[string]any{"decorate": testName(t)}}}}
	created, err := env.Dynamic.Resource(namespacesGVR).Create(ctx(t), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(namespacesGVR).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	})
	after := waitFor(t, namespacesGVR, "", created.GetName(), "the hook's status in the annotation", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetAnnotations()[engine.StatusAnnotation] == `{"phaseSeen":"Active"}`
	})
	if phase, _, _ := unstructured.NestedString(after.Object, "status", "phase"); phase != "Active" || len(after.Object["status"].(map[string]any)) != 1 {
		t.Errorf("the namespace's own status is %v, want {phase: Active} untouched", after.Object["status"])
	}
	calls := h.calls.Load()
	testenv.Eventually(t, 20*time.Second, "two more resyncs", func(context.Context) (bool, error) { return h.calls.Load() >= calls+2, nil })
	if got := controllertest.Writes(c.Name(), "patch", "status") - writes0; got != 1 {
		t.Errorf("%v status writes, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, st := range seen {
		if m, _ := st.(map[string]any); len(m) != 1 || m["phase"] != "Active" {
			t.Errorf("call %d was given object.status %v, want the namespace's own {phase: Active}", i+1, st)
		}
	}
}
