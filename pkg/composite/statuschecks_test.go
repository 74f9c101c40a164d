package composite

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestCheckStatus: a rolling update's status checks of a child
// (checkStatus): each check needs a condition of its type (the first of
// that type counts), with its status and reason when the check names
// them; the message says which and why.
func TestCheckStatus(t *testing.T) {
	child := func(conditions ...map[string]any) *unstructured.Unstructured {
		list := make([]any, len(conditions))
		for i, c := range conditions {
			list[i] = c
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": list}}}
	}
	ready := v1alpha1.StatusConditionCheck{Type: "Ready", Status: ptr.To("True")}
	readyBecause := v1alpha1.StatusConditionCheck{Type: "Ready", Status: ptr.To("True"), Reason: ptr.To("AllGood")}
	present := v1alpha1.StatusConditionCheck{Type: "Available"}
	for _, tc := range []struct {
		name   string
		obj    *unstructured.Unstructured
		checks []v1alpha1.StatusConditionCheck
		err    string // "": passes
	}{
		{"no checks", child(), nil, ""},
		{"ready", child(map[string]any{"type": "Ready", "status": "True"}), []v1alpha1.StatusConditionCheck{ready}, ""},
		{"no such condition", child(map[string]any{"type": "Other", "status": "True"}), []v1alpha1.StatusConditionCheck{ready}, `required condition type missing: "Ready"`},
		{"no status at all", &unstructured.Unstructured{Object: map[string]any{}}, []v1alpha1.StatusConditionCheck{ready}, `required condition type missing: "Ready"`},
		{"another status", child(map[string]any{"type": "Ready", "status": "False"}), []v1alpha1.StatusConditionCheck{ready}, `"Ready" condition status is "False" (want "True")`},
		{"the first of a type counts", child(map[string]any{"type": "Ready", "status": "False"}, map[string]any{"type": "Ready", "status": "True"}),
			[]v1alpha1.StatusConditionCheck{ready}, `"Ready" condition status is "False" (want "True")`},
		{"another reason", child(map[string]any{"type": "Ready", "status": "True", "reason": "Partly"}), []v1alpha1.StatusConditionCheck{readyBecause},
			`"Ready" condition reason is "Partly" (want "AllGood")`},
		{"the reason asked for", child(map[string]any{"type": "Ready", "status": "True", "reason": "AllGood"}), []v1alpha1.StatusConditionCheck{readyBecause}, ""},
		{"a type only: any status", child(map[string]any{"type": "Available", "status": "Unknown"}), []v1alpha1.StatusConditionCheck{present}, ""},
		{"every check must pass", child(map[string]any{"type": "Ready", "status": "True"}), []v1alpha1.StatusConditionCheck{ready, present},
			`required condition type missing: "Available"`},
	} {
		err := checkStatus(tc.obj, tc.checks)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v, want it to pass", tc.name, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%s: %v, want %s", tc.name, err, tc.err)
		}
	}
}
