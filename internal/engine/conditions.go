package engine

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/dynamic/status"
)

// fillConditions completes the conditions of the status an answer asks
// for (status.FillConditions: lastTransitionTime, observedGeneration)
// against the status of given, the object as the hook was given it in
// this round, with the generation of t's object. The rounds call it
// before they compare the answer's status with the given one, so that the
// times metactl keeps are no change and a hook that answers the same
// conditions reaches a fixed point. A nil status (left alone) and a
// status without a list of conditions are left as they are.
//
// A filled field counts as a change only in a condition whose counterpart
// in the given status (same type) has that field: when the answer differs
// from the given status only by filled fields its conditions lack, the
// answer's status is the given one, without them. So adding them alone
// never writes a status: not when a controller takes over objects whose
// conditions were written without them (by metacontroller, say), and not
// when the status schema of the resource prunes them, where a write of
// them would never stick and the status would be written again at every
// sync.
func (e *Engine) fillConditions(t *Target, given *unstructured.Unstructured, answer *Answer) {
	want := answer.Status
	list, ok := want["conditions"].([]any)
	if !ok {
		return
	}
	// What the hook left out, before it is filled.
	absent := make([][]string, len(list))
	for i, c := range list {
		if cond, ok := c.(map[string]any); ok {
			for _, f := range status.FilledFields {
				if _, has := cond[f]; !has {
					absent[i] = append(absent[i], f)
				}
			}
		}
	}
	have, _ := given.Object["status"].(map[string]any)
	if !status.FillConditions(have, want, t.Object.GetGeneration(), time.Now()) {
		return
	}
	// want without the filled fields the given conditions lack; none to
	// strip leaves want as filled, with no second comparison.
	var bareList []any
	for i, fields := range absent {
		cond, ok := list[i].(map[string]any)
		if !ok || len(fields) == 0 {
			continue
		}
		typ, _ := cond["type"].(string)
		stripped := status.Unkept(status.FindCondition(have, typ), cond, fields)
		if len(stripped) == len(cond) {
			continue // Unkept only removes: nothing stripped
		}
		if bareList == nil {
			bareList = slices.Clone(list)
		}
		bareList[i] = stripped
	}
	if bareList == nil {
		return
	}
	bare := maps.Clone(want)
	bare["conditions"] = bareList
	if status.Equal(have, bare) {
		answer.Status = bare
	}
}
