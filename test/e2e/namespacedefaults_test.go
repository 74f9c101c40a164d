package e2e

import (
	"encoding/json"
	"slices"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	namespacesGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	networkPoliciesGVR = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	resourceQuotasGVR  = schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}
	roleBindingsGVR    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

// TestNamespaceDefaultsPython: labelled Namespaces (a built-in parent)
// get a NetworkPolicy, a ResourceQuota and a RoleBinding from their
// annotations; the hook's status is kept in the metactl.io/status
// annotation and given back to the hook (previousTeams grows when the team
// changes); the Namespaces' real status is untouched; an unlabelled
// Namespace gets nothing.
func TestNamespaceDefaultsPython(t *testing.T) {
	ex := startExample(t, "python", "namespace-defaults")
	waitControllerReady(t, "compositecontrollers", "namespace-defaults")
	ex.applySample(t, "")

	stored := func(o *unstructured.Unstructured) map[string]any {
		var st map[string]any
		if raw, ok := o.GetAnnotations()["metactl.io/status"]; ok {
			_ = json.Unmarshal([]byte(raw), &st)
		}
		return st
	}
	for _, c := range []struct{ ns, team, pods string }{{"shop", "shop-team", "20"}, {"analytics", "platform", "50"}} {
		waitFor(t, settle, networkPoliciesGVR, c.ns, "default-deny-ingress", "created", func(o *unstructured.Unstructured) bool { return o != nil })
		waitFor(t, settle, resourceQuotasGVR, c.ns, "default-quota", "pods "+c.pods, func(o *unstructured.Unstructured) bool {
			if o == nil {
				return false
			}
			pods, _, _ := unstructured.NestedString(o.Object, "spec", "hard", "pods")
			return pods == c.pods
		})
		waitFor(t, settle, roleBindingsGVR, c.ns, "team-edit", "bound to "+c.team, subjectIs(c.team))
		waitFor(t, settle, namespacesGVR, "", c.ns, "status in the annotation: 3 defaults, team "+c.team, func(o *unstructured.Unstructured) bool {
			if o == nil {
				return false
			}
			st := stored(o)
			return st["team"] == c.team && st["defaults"] == float64(3)
		})
		if phase, _, _ := unstructured.NestedString(get(t, namespacesGVR, "", c.ns).Object, "status", "phase"); phase != "Active" {
			t.Errorf("namespace %s: status.phase = %q, want Active", c.ns, phase)
		}
	}

	// The hook reads its own status back: the old team goes to previousTeams.
	kubectl(t, "annotate", "namespace", "shop", "example.metactl.io/team=payments", "--overwrite")
	waitFor(t, settle, roleBindingsGVR, "shop", "team-edit", "bound to payments", subjectIs("payments"))
	waitFor(t, settle, namespacesGVR, "", "shop", "previousTeams [shop-team]", func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		st := stored(o)
		prev, _ := st["previousTeams"].([]any)
		return st["team"] == "payments" && slices.Equal(prev, []any{"shop-team"})
	})
	if list := kubectl(t, "get", "resourcequotas", "-n", "sandbox", "-o", "name"); list != "" {
		t.Errorf("the unlabelled namespace got %q", list)
	}
	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
}

// subjectIs checks that a RoleBinding's first subject is the group name.
func subjectIs(name string) func(*unstructured.Unstructured) bool {
	return func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		return len(subjects) == 1 && subjects[0].(map[string]any)["name"] == name
	}
}
