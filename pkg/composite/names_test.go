//go:build integration

package composite_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/testenv"
)

// TestChildNamesAreTheServersToJudge asks for a Role named "app:reader",
// which is no DNS subdomain but a name RBAC objects take, and a ConfigMap
// the API server refuses to name "Not_Valid", next to a plain ConfigMap:
// the Role and the plain ConfigMap are written, the parent's status too,
// and the refused child is reported on the parent as a SyncError Event
// carrying the reason (children.CheckName, the server's rule, says it
// before the write), and retried.
func TestChildNamesAreTheServersToJudge(t *testing.T) {
	rolesGVR := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	h := newTestHook(t, func(req *syncRequest) any {
		labels := map[string]any{"parent": req.Parent.GetName()}
		return map[string]any{
			"status": map[string]any{"answered": true},
			"children": []any{
				map[string]any{
					"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
					"metadata": map[string]any{"name": "app:reader", "labels": labels},
					"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}},
				},
				configMapChild(req.Parent, "Not_Valid", nil),
				configMapChild(req.Parent, "plain", nil),
			},
		}
	})
	startController(t, compositeController(t, h, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = append(spec["childResources"].([]any),
			map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "roles"})
	}))
	ns := env.CreateNamespace(t)
	newThing(t, thingsGVR, ns, "p1", nil)

	waitFor(t, rolesGVR, ns, "app:reader", "created", exists)
	waitFor(t, configMapsGVR, ns, "plain", "created", exists)
	waitFor(t, thingsGVR, ns, "p1", "status written", func(obj *unstructured.Unstructured) bool {
		return obj != nil && statusField(obj, "answered") == true
	})
	waitForEvent(t, ns, "p1", "SyncError", `invalid metadata.name "Not_Valid" for a ConfigMap, which the API server refuses`)
	calls := h.calls.Load()
	testenv.Eventually(t, 30*time.Second, "a retry", func(context.Context) (bool, error) { return h.calls.Load() > calls, nil })
}
