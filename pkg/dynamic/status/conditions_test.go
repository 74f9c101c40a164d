package status

import (
	"testing"
	"time"
)

func TestFillConditions(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 500, time.UTC)
	earlier := "2026-11-25T08:00:00Z"
	given := map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": earlier, "observedGeneration": int64(3)},
		map[string]any{"type": "Degraded", "status": "False", "lastTransitionTime": earlier},
	}}
	want := map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True"},                                                   // unchanged: keeps its time
		map[string]any{"type": "Degraded", "status": "True"},                                                // changed: now
		map[string]any{"type": "New", "status": "Unknown"},                                                  // new: now
		map[string]any{"type": "Own", "status": "True", "lastTransitionTime": "x", "observedGeneration": 1}, // the hook's own kept
		"not a condition",
	}}
	if !FillConditions(given, want, 4, now) {
		t.Fatal("FillConditions reported no change")
	}
	conds := want["conditions"].([]any)
	check := func(i int, time string, gen any) {
		t.Helper()
		c := conds[i].(map[string]any)
		if c["lastTransitionTime"] != time || c["observedGeneration"] != gen {
			t.Errorf("condition %v: lastTransitionTime %v observedGeneration %v, want %v %v", c["type"], c["lastTransitionTime"], c["observedGeneration"], time, gen)
		}
	}
	check(0, earlier, int64(4))
	check(1, "2026-11-26T12:00:00Z", int64(4))
	check(2, "2026-11-26T12:00:00Z", int64(4))
	check(3, "x", 1)

	// A fixed point: the same answer over the status as written changes
	// nothing, however much later.
	again := map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	FillConditions(want, again, 4, now.Add(time.Hour))
	if !Equal(map[string]any{"conditions": []any{conds[0]}}, again) {
		t.Errorf("second fill %v differs from the first %v", again, conds[0])
	}
}

func TestUnkept(t *testing.T) {
	cond := map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "t", "observedGeneration": int64(2)}
	// The stored condition lacks both (pruned): both dropped, cond kept.
	got := Unkept(map[string]any{"type": "Ready", "status": "True"}, cond, FilledFields)
	if !Equal(got, map[string]any{"type": "Ready", "status": "True"}) || len(cond) != 4 {
		t.Errorf("Unkept(pruned) = %v, cond now %v", got, cond)
	}
	// It has lastTransitionTime only: observedGeneration dropped.
	got = Unkept(map[string]any{"lastTransitionTime": "s"}, cond, FilledFields)
	if _, has := got["observedGeneration"]; has || got["lastTransitionTime"] != "t" {
		t.Errorf("Unkept(time kept) = %v", got)
	}
	// Only the fields named count; none dropped returns cond itself.
	full := map[string]any{"lastTransitionTime": "s", "observedGeneration": int64(1)}
	if got := Unkept(full, cond, FilledFields); len(got) != 4 {
		t.Errorf("Unkept(full) = %v", got)
	}
	if got := Unkept(nil, cond, []string{"lastTransitionTime"}); len(got) != 3 || got["observedGeneration"] != int64(2) {
		t.Errorf("Unkept(nil, time only) = %v", got)
	}
}

func TestSetAndFindCondition(t *testing.T) {
	ready := map[string]any{"type": "Ready", "status": "True"}
	synced := map[string]any{"type": "Synced", "status": "True", "reason": "Fine"}
	st := map[string]any{"a": int64(1), "conditions": []any{map[string]any{"type": "Synced", "status": "False"}, ready, map[string]any{"type": "Synced", "status": "Unknown"}}}
	got, err := SetCondition(st, "Synced", synced)
	if err != nil || !Equal(got, map[string]any{"a": int64(1), "conditions": []any{synced, ready}}) {
		t.Errorf("SetCondition = %v, %v", got, err)
	}
	if FindCondition(st, "Synced")["status"] != "False" {
		t.Error("SetCondition changed the status it was given")
	}
	if c := FindCondition(got, "Synced"); !Equal(c, synced) {
		t.Errorf("FindCondition = %v", c)
	} else if c["reason"] = "Other"; synced["reason"] != "Fine" {
		t.Error("the condition set is cond itself, not a copy")
	}
	// Unchanged: st itself, nothing allocated.
	same := map[string]any{"conditions": []any{map[string]any{"type": "Synced", "status": "True", "reason": "Fine"}}}
	if got, _ := SetCondition(same, "Synced", synced); !sameMap(got, same) {
		t.Error("SetCondition of the condition st has copied st")
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = SetCondition(same, "Synced", synced) }); allocs > 0 {
		t.Errorf("SetCondition of an unchanged condition allocates %v times", allocs)
	}
	// Removing: none there is st itself; one there is removed.
	if got, _ := SetCondition(map[string]any{"x": 1}, "Synced", nil); len(got) != 1 {
		t.Errorf("SetCondition(nil) = %v", got)
	}
	if got, _ := SetCondition(same, "Synced", nil); FindCondition(got, "Synced") != nil {
		t.Errorf("SetCondition(nil) = %v", got)
	}
	// Into no status, and into conditions that are not a list.
	if got, _ := SetCondition(nil, "Synced", synced); !Equal(got, map[string]any{"conditions": []any{synced}}) {
		t.Errorf("SetCondition(nil status) = %v", got)
	}
	if _, err := SetCondition(map[string]any{"conditions": "ready"}, "Synced", synced); err == nil {
		t.Error("conditions that are not a list: no error")
	}
}

func sameMap(a, b map[string]any) bool {
	a["__probe"] = true
	defer delete(a, "__probe")
	return b["__probe"] == true
}
