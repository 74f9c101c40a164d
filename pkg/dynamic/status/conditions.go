package status

import (
	"fmt"
	"maps"
	"time"
)

// FilledFields are the fields of a condition that FillConditions fills.
var FilledFields = []string{"lastTransitionTime", "observedGeneration"}

// A condition, in a status's "conditions" list, is an object with string
// "type" and "status" fields (metav1.Condition's shape); entries of another
// shape are left as they are.

// FillConditions completes the conditions of want, a status about to be
// written over given (the status the object has, or had when the hook
// was called), in place:
//
//   - lastTransitionTime, when a condition lacks it (or has it empty): the
//     given condition's of the same type when its status is the same, so
//     that a condition that did not change keeps the time it last changed;
//     else now, in RFC 3339 to the second (UTC), as the API server writes
//     times;
//   - observedGeneration, when a condition lacks it and generation is
//     positive: generation, the generation of the object whose status it
//     is.
//
// What a condition has is never changed. Given the same given, want and
// generation, the result is the same at any later now unless a condition's
// status changed, so a hook that answers the same conditions reaches a fixed
// point. It reports whether it changed want.
func FillConditions(given, want map[string]any, generation int64, now time.Time) bool {
	wantList, ok := want["conditions"].([]any)
	if !ok {
		return false
	}
	changed := false
	// now as text, made once and only when a condition needs it.
	var nowText string
	for _, c := range wantList {
		cond, typ, st, ok := condition(c)
		if !ok {
			continue
		}
		if t, _ := cond["lastTransitionTime"].(string); t == "" {
			if old := FindCondition(given, typ); old != nil {
				if oldStatus, _ := old["status"].(string); oldStatus == st {
					t, _ = old["lastTransitionTime"].(string)
				}
			}
			if t == "" {
				if nowText == "" {
					nowText = now.UTC().Truncate(time.Second).Format(time.RFC3339)
				}
				t = nowText
			}
			cond["lastTransitionTime"] = t
			changed = true
		}
		if _, has := cond["observedGeneration"]; !has && generation > 0 {
			cond["observedGeneration"] = generation
			changed = true
		}
	}
	return changed
}

// condition returns c as a condition, with its type and status, when it
// has the shape of one.
func condition(c any) (cond map[string]any, typ, status string, ok bool) {
	cond, ok = c.(map[string]any)
	if !ok {
		return nil, "", "", false
	}
	typ, ok1 := cond["type"].(string)
	status, ok2 := cond["status"].(string)
	if !ok1 || !ok2 || typ == "" {
		return nil, "", "", false
	}
	return cond, typ, status, true
}

// Unkept returns cond without those of fields (filled fields: FilledFields
// or some of them) that old, the stored condition of its type (nil when
// there is none), lacks; cond itself when it drops none. A filled field
// counts as a change only where the stored condition has it: one that
// never had it (written by metacontroller, or pruned by the status schema)
// is not written again only to add it. cond is not changed.
func Unkept(old, cond map[string]any, fields []string) map[string]any {
	var out map[string]any
	for _, f := range fields {
		if _, has := cond[f]; !has {
			continue
		}
		if _, kept := old[f]; kept {
			continue
		}
		if out == nil {
			out = maps.Clone(cond)
		}
		delete(out, f)
	}
	if out == nil {
		return cond
	}
	return out
}

// FindCondition returns the first condition of type typ in st's
// conditions; nil when it has none (or its conditions are not a list).
func FindCondition(st map[string]any, typ string) map[string]any {
	list, _ := st["conditions"].([]any)
	for _, c := range list {
		if cond, t, _, ok := condition(c); ok && t == typ {
			return cond
		}
	}
	return nil
}

// SetCondition returns st with a copy of cond as its only condition of
// type typ: in place of the first of that type (the others of the type
// removed), else appended; with cond nil, without any of that type. The
// other conditions and fields are kept, in order. st is not changed: the
// result is a copy, or st itself when it has cond already (compared
// semantically), so that a caller that sets the same condition at each
// sync allocates nothing. Conditions that are not a list are an error.
func SetCondition(st map[string]any, typ string, cond map[string]any) (map[string]any, error) {
	list, isList := st["conditions"].([]any)
	if v := st["conditions"]; v != nil && !isList {
		return st, fmt.Errorf("status.conditions is a %T, not a list: the %s condition cannot be set", v, typ)
	}
	// Unchanged: one condition of the type, the same as cond (or none).
	found, same := 0, cond == nil
	for _, c := range list {
		if old, t, _, ok := condition(c); ok && t == typ {
			found++
			same = cond != nil && Equal(old, cond)
		}
	}
	if (cond == nil && found == 0) || (found == 1 && same) {
		return st, nil
	}
	out := make([]any, 0, len(list)+1)
	placed := false
	for _, c := range list {
		if _, t, _, ok := condition(c); ok && t == typ {
			if cond != nil && !placed {
				out = append(out, maps.Clone(cond))
				placed = true
			}
			continue
		}
		out = append(out, c)
	}
	if cond != nil && !placed {
		out = append(out, maps.Clone(cond))
	}
	copied := maps.Clone(st)
	if copied == nil {
		copied = map[string]any{}
	}
	copied["conditions"] = out
	return copied, nil
}
