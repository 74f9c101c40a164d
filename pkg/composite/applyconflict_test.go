//go:build integration

package composite_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
)

// TestRefusedApplyConflictIsAFailure: applying server-side without forcing
// conflicts (--refuse-apply-conflicts), a child apply refused because
// another field manager owns a field it sets is reported as the failure it
// is: a SyncError Event, Synced=False WriteFailed, and the object counted
// as failing; not dropped as a transient conflict that a retry resolves.
func TestRefusedApplyConflictIsAFailure(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"status": map[string]any{"x": 1}, "children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"value": "a"})}}
	})
	c := startController(t, optIn(isolated(compositeController(t, hook, thingsGVR, nil), ns), "true"), func(o *composite.Options) {
		o.ApplyStrategy = engine.ApplyServerSide
		o.RefuseApplyConflicts = true
	})
	newParent(t, ns, "p1", nil)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	waitFor(t, configMaps, ns, "p1-cm", "the child", func(o *unstructured.Unstructured) bool { return o != nil })

	// Another field manager takes data.value: the child's next apply
	// (its change syncs the parent) conflicts.
	patch, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "p1-cm", "namespace": ns}, "data": map[string]any{"value": "b"}})
	if _, err := env.Dynamic.Resource(configMaps).Namespace(ns).Patch(ctx(t), "p1-cm", types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: "intruder", Force: func() *bool { b := true; return &b }()}); err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, ns, "p1", engine.ReasonSyncError, "other field managers own fields")
	obj := waitFor(t, thingsGVR, ns, "p1", "Synced=False "+engine.ReasonWriteFailed, hasSynced("False", engine.ReasonWriteFailed))
	if msg, _ := syncedCondition(obj)["message"].(string); !strings.Contains(msg, "conflicts are not forced") {
		t.Errorf("Synced message %q does not say the apply was refused", msg)
	}
	testenv.Eventually(t, 30*time.Second, "the parent counted as failing", func(context.Context) (bool, error) {
		return c.Failing().Summary().Count == 1, nil
	})
}
