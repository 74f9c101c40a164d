package apply

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// FuzzMerge checks the merge contract on arbitrary JSON objects observed,
// lastApplied ("" for none) and desired. Inputs that are not JSON objects
// are skipped. The seed corpus is in testdata/fuzz/FuzzMerge.
func FuzzMerge(f *testing.F) {
	f.Add(`{"spec":{"x":1,"y":2}}`, `{"spec":{"y":2}}`, `{"spec":{"x":3}}`)
	f.Fuzz(func(t *testing.T, observedJSON, lastAppliedJSON, desiredJSON string) {
		o, ok := fuzzObject(observedJSON)
		if !ok {
			t.Skip()
		}
		var l map[string]any
		if lastAppliedJSON != "" {
			if l, ok = fuzzObject(lastAppliedJSON); !ok {
				t.Skip()
			}
		}
		d, ok := fuzzObject(desiredJSON)
		if !ok {
			t.Skip()
		}

		r, err := Merge(o, l, d)
		if err != nil {
			t.Fatalf("Merge: %v", err)
		}

		// Arguments untouched.
		for _, a := range []struct {
			name, json string
			now        map[string]any
		}{{"observed", observedJSON, o}, {"lastApplied", lastAppliedJSON, l}, {"desired", desiredJSON, d}} {
			if orig, _ := fuzzObject(a.json); !equal(orig, a.now) {
				t.Fatalf("Merge modified %s: %s", a.name, encode(a.now))
			}
		}

		// (1) desired is in the result, (3) fields nobody declared are
		// kept, and what lastApplied had and desired lacks is removed.
		if err := checkMerged("", o, l, d, r); err != nil {
			t.Fatalf("%v\nobserved    %s\nlastApplied %s\ndesired     %s\nresult      %s",
				err, observedJSON, lastAppliedJSON, desiredJSON, encode(r))
		}

		// (2) Idempotent: merging again with lastApplied = desired changes
		// nothing.
		again, err := Merge(r, d, d)
		if err != nil {
			t.Fatalf("Merge again: %v", err)
		}
		if !equal(again, r) {
			t.Fatalf("not idempotent:\nfirst  %s\nsecond %s\nobserved    %s\nlastApplied %s\ndesired     %s",
				encode(r), encode(again), observedJSON, lastAppliedJSON, desiredJSON)
		}

		// Deterministic.
		if r2, _ := Merge(o, l, d); !equal(r2, r) {
			t.Fatalf("not deterministic:\nfirst  %s\nsecond %s", encode(r), encode(r2))
		}

		checkApply(t, o, l, d)
	})
}

// fuzzObject decodes s as unstructured.Unstructured would; ok is false if s
// is not a JSON object.
func fuzzObject(s string) (map[string]any, bool) {
	var v any
	if err := utiljson.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok && m != nil
}

// checkApply checks Apply on the same inputs: a second Apply of the same
// desired state reports no change, and status and read-only metadata are
// observed's. Inputs Apply refuses (metadata that is not an object) are
// skipped.
func checkApply(t *testing.T, o, l, d map[string]any) {
	t.Helper()
	observed := &unstructured.Unstructured{Object: deepCopy(o).(map[string]any)}
	if l != nil {
		if err := SetLastApplied(observed, l); err != nil {
			return
		}
	}
	desired := &unstructured.Unstructured{Object: d}
	res, _, err := Apply(observed, desired)
	if err != nil {
		return
	}
	if s, ok := observed.Object["status"]; ok != hasKey(res.Object, "status") || !equal(s, res.Object["status"]) {
		t.Fatalf("Apply wrote status: %s, observed %s", encode(res.Object["status"]), encode(s))
	}
	om, _ := observed.Object["metadata"].(map[string]any)
	rm, _ := res.Object["metadata"].(map[string]any)
	for _, k := range readOnlyMetadata {
		ov, ok := om[k]
		if ok != hasKey(rm, k) || !equal(ov, rm[k]) {
			t.Fatalf("Apply wrote metadata.%s: %s, observed %s", k, encode(rm[k]), encode(ov))
		}
	}
	res2, changed, err := Apply(res, desired)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if changed || !equal(res2.Object, res.Object) {
		t.Fatalf("second Apply changed the object:\nfirst  %s\nsecond %s\ndesired %s", encode(res.Object), encode(res2.Object), encode(d))
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// checkMerged checks that r, the merge of desired d onto observed o with
// last applied l, holds what the contract promises at path. It
// deliberately recomputes the expectations from the rules rather than
// calling the merge code; only the choice of a list's merge key is taken
// from chooseKey.
func checkMerged(path string, o, l, d, r any) error {
	switch dv := d.(type) {
	case map[string]any:
		rm, ok := r.(map[string]any)
		if !ok || rm == nil {
			return fmt.Errorf("%s: result is %s, want an object", path, encode(r))
		}
		om, _ := o.(map[string]any)
		lm, _ := l.(map[string]any)
		for k, v := range dv {
			p := path + "." + k
			rv, present := rm[k]
			if isNull(v) {
				ov, observedNull := om[k]
				observedNull = observedNull && isNull(ov)
				if present != observedNull || (present && !isNull(rv)) {
					return fmt.Errorf("%s: desired null, observed %s, result has %s (want null kept only where observed is null)", p, encode(ov), encode(rv))
				}
				continue
			}
			if !present {
				return fmt.Errorf("%s: desired %s, missing from result", p, encode(v))
			}
			if err := checkMerged(p, om[k], lm[k], v, rv); err != nil {
				return err
			}
		}
		for k, v := range om {
			if hasKey(dv, k) || hasKey(lm, k) {
				continue
			}
			if rv, present := rm[k]; !present || !equal(rv, v) {
				return fmt.Errorf("%s.%s: nobody declared it, observed %s, result %s (present %v)", path, k, encode(v), encode(rv), present)
			}
		}
		for k := range lm {
			if !hasKey(dv, k) && hasKey(rm, k) {
				return fmt.Errorf("%s.%s: last applied and no longer desired, result still has %s", path, k, encode(rm[k]))
			}
		}
		for k := range rm {
			if !hasKey(dv, k) && !hasKey(om, k) {
				return fmt.Errorf("%s.%s: result has a field neither observed nor desired has", path, k)
			}
		}
		return nil
	case []any:
		return checkMergedList(path, o, l, dv, r)
	default:
		if !equal(r, d) {
			return fmt.Errorf("%s: result %s, desired %s", path, encode(r), encode(d))
		}
		return nil
	}
}

func checkMergedList(path string, o, l any, d []any, r any) error {
	rl, ok := r.([]any)
	if !ok || rl == nil {
		return fmt.Errorf("%s: result is %s, want a list", path, encode(r))
	}
	ol, oList := o.([]any)
	ll, lList := l.([]any)
	key := chooseKey(d, ol, oList, ll, lList)
	if key == "" {
		if want := pruned(d); !equal(rl, want) {
			return fmt.Errorf("%s: replaced list is %s, want %s", path, encode(rl), encode(want))
		}
		return nil
	}
	find := func(list []any, k any) (map[string]any, int) {
		var found map[string]any
		n := 0
		for _, e := range list {
			if m, _ := e.(map[string]any); m != nil && hasKey(m, key) && equal(m[key], k) {
				found = m
				n++
			}
		}
		return found, n
	}
	// Observed's order: each observed element merged with its desired
	// element, or dropped (lastApplied has its key, desired not), or kept
	// as it is; then the desired elements observed lacks, in desired's
	// order.
	var want []map[string]any // the desired element (nil: kept) of each result element
	var kept []any            // the kept observed element, where want is nil
	for _, e := range ol {
		k := e.(map[string]any)[key]
		if de, n := find(d, k); n > 0 {
			want, kept = append(want, de), append(kept, nil)
			continue
		}
		if _, n := find(ll, k); n > 0 {
			continue
		}
		want, kept = append(want, nil), append(kept, e)
	}
	for _, e := range d {
		em := e.(map[string]any)
		if _, n := find(ol, em[key]); n == 0 {
			want, kept = append(want, em), append(kept, nil)
		}
	}
	if len(rl) != len(want) {
		return fmt.Errorf("%s: result %s has %d elements, want %d (observed %s, desired %s)", path, encode(rl), len(rl), len(want), encode(ol), encode(d))
	}
	for i, em := range want {
		if em == nil {
			if !equal(rl[i], kept[i]) {
				return fmt.Errorf("%s: result element %d is %s, want the undeclared observed element %s", path, i, encode(rl[i]), encode(kept[i]))
			}
			continue
		}
		p := fmt.Sprintf("%s[%s=%s]", path, key, encode(em[key]))
		rm, _ := rl[i].(map[string]any)
		if rm == nil || !equal(rm[key], em[key]) {
			return fmt.Errorf("%s: result element %d is %s, want the desired element in observed's order", p, i, encode(rl[i]))
		}
		if _, n := find(rl, em[key]); n != 1 {
			return fmt.Errorf("%s: %d result elements with this key, want 1", p, n)
		}
		oe, _ := find(ol, em[key])
		le, _ := find(ll, em[key])
		var oa, la any
		if oe != nil {
			oa = oe
		}
		if le != nil {
			la = le
		}
		if err := checkMerged(p, oa, la, em, rm); err != nil {
			return err
		}
	}
	return nil
}

// pruned returns v with null object fields removed at any depth.
func pruned(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			if !isNull(e) {
				m[k] = pruned(e)
			}
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, e := range t {
			l[i] = pruned(e)
		}
		return l
	}
	return v
}
