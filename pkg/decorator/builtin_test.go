package decorator_test

import (
	"context"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/controller"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDecoratedConfigMapStatusInAnnotation: the rule for built-in parents
// holds for decorated objects too: a ConfigMap's status from the hook is
// kept in the metactl.io/status annotation and given back as
// object.status, so a hook stepping on its own status settles, with one
// status write however often it is resynced.
func TestDecoratedConfigMapStatusInAnnotation(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		step, _, _ := unstructured.NestedString(req.Object.Object, "status", "step")
		next := map[string]string{"": "one", "one": "two", "two": "two"}[step]
		return map[string]any{"status": map[string]any{"step": next}}
	})
	c := start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": ns}}}}, nil, syncHook(h), func(obj *unstructured.Unstructured) {
		obj.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
	})
	writes0 := controllertest.Writes(c.Name(), "patch", "status")
	createConfigMap(t, ns, "target", map[string]any{"decorate": ns}, nil)
	waitFor(t, configMapsGVR, ns, "target", "step two in the annotation", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetAnnotations()[controller.StatusAnnotation] == `{"step":"two"}`
	})
	calls := h.calls.Load()
	testenv.Eventually(t, 20*time.Second, "two more resyncs", func(context.Context) (bool, error) { return h.calls.Load() >= calls+2, nil })
	if got := controllertest.Writes(c.Name(), "patch", "status") - writes0; got != 1 {
		t.Errorf("%v status writes, want 1: the stored status is not given back to the hook", got)
	}
}
