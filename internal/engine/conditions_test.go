package engine

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/dynamic/status"
)

// TestFilledFieldsCountWhereTheGivenHasThem: fillConditions completes the
// answer's conditions, and the fields it fills count as a change only
// where the given condition has them.
func TestFilledFieldsCountWhereTheGivenHasThem(t *testing.T) {
	const old = "2020-01-01T00:00:00Z"
	cond := func(st string, fields ...any) map[string]any {
		c := map[string]any{"type": "Ready", "status": st}
		for i := 0; i+1 < len(fields); i += 2 {
			c[fields[i].(string)] = fields[i+1]
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		given map[string]any // the given condition; nil: none
		want  string         // "same": the answer is the given status; "filled": filled and changed
	}{
		{"first time", nil, "filled"},
		{"kept times", cond("True", "lastTransitionTime", old, "observedGeneration", int64(2)), "same"},
		{"taken over without them", cond("True"), "same"},
		{"a schema that prunes observedGeneration", cond("True", "lastTransitionTime", old), "same"},
		{"a new generation", cond("True", "lastTransitionTime", old, "observedGeneration", int64(1)), "filled"},
		{"a flip", cond("False", "lastTransitionTime", old, "observedGeneration", int64(2)), "filled"},
		{"a flip, taken over without them", cond("False"), "filled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := thing()
			obj.SetGeneration(2)
			given := obj.DeepCopy()
			if tc.given != nil {
				given.Object["status"] = map[string]any{"conditions": []any{tc.given}}
			}
			answer := &Answer{Status: map[string]any{"conditions": []any{cond("True")}}}
			e := &Engine{}
			e.fillConditions(&Target{Object: obj}, given, answer)
			have, _ := given.Object["status"].(map[string]any)
			same := status.Equal(have, answer.Status)
			if same != (tc.want == "same") {
				t.Fatalf("answer %v, given %v: same = %v, want %s", answer.Status, have, same, tc.want)
			}
			if tc.want == "filled" {
				got, _, _ := unstructured.NestedSlice(answer.Status, "conditions")
				c := got[0].(map[string]any)
				if c["lastTransitionTime"] == nil || c["observedGeneration"] != int64(2) {
					t.Errorf("Ready = %v: want both fields filled", c)
				}
				if tc.given != nil && tc.given["status"] == "True" && c["lastTransitionTime"] != old {
					t.Errorf("Ready = %v: want the time kept (%s)", c, old)
				}
			}
		})
	}
}
