package apply

import (
	"bytes"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Configuration returns what a server-side apply of desired sends: desired
// stripped as by Apply (no status, no read-only metadata, no
// LastAppliedAnnotation), a Secret's stringData turned into data, and the
// null fields of its objects removed (a null field is one this manager
// does not set; the server removes a field only when no manager sets it
// any more). desired is not modified; the result shares nothing with it.
func Configuration(desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if desired == nil {
		return nil, fmt.Errorf("apply configuration: desired must not be nil")
	}
	want, err := strip(desired.Object)
	if err != nil {
		return nil, fmt.Errorf("apply configuration of %s: %w", describe(desired), err)
	}
	if err := validate(want); err != nil {
		return nil, fmt.Errorf("apply configuration of %s: %w", describe(desired), err)
	}
	out, _ := withoutNulls(deepCopy(want)).(map[string]any)
	return &unstructured.Unstructured{Object: normalizeSecret(out)}, nil
}

// ServerSide returns the apply configuration of desired (Configuration)
// and whether applying it with field manager manager would change
// observed, the object as cached. changed is false exactly when
//
//   - observed has an Apply entry of manager in its managedFields, for
//     desired's apiVersion;
//   - every field of the configuration has the same value in observed: a
//     map's fields each as in observed (observed may have more); the
//     elements of a list the manager owns by key (a list map) each as the
//     observed element of the same key, and of a list it owns by value (a
//     set) each present in observed; any other list element by element,
//     of the same length (an atomic list);
//   - every field the manager owns is in the configuration (else the apply
//     would remove it, or give it up).
//
// So a field another client changed, removed or added to an atomic list
// is put back by the next apply, and a field the hook stopped setting is
// removed; an object as the last apply left it is not written. Values the
// server normalizes (a quantity "1000m" stored as "1") count as changed:
// the apply is sent, and the server writes nothing. observed nil: changed.
// Neither argument is modified.
func ServerSide(observed, desired *unstructured.Unstructured, manager string) (config *unstructured.Unstructured, changed bool, err error) {
	config, err = Configuration(desired)
	if err != nil {
		return nil, false, err
	}
	if observed == nil {
		return config, true, nil
	}
	owned := OwnedFields(observed.GetManagedFields(), manager, config.GetAPIVersion())
	if owned == nil {
		return config, true, nil
	}
	return config, !subset(config.Object, observed.Object, owned) || !within(owned, config.Object, nil), nil
}

// Holds reports whether observed already has every field of config with
// its value (lists element by element): applying config would change no
// content, only, for a manager without an entry, which fields it owns.
func Holds(observed, config *unstructured.Unstructured) bool {
	return subset(config.Object, observed.Object, nil)
}

// OwnedFields returns the fields that manager owns through server-side
// apply (its entry of operation Apply, on the object itself rather than a
// subresource) in entries, or nil when it has no such entry, when the entry
// is of another apiVersion than apiVersion, or when its fields do not
// decode.
func OwnedFields(entries []metav1.ManagedFieldsEntry, manager, apiVersion string) *fieldpath.Set {
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		if e.APIVersion != apiVersion || e.FieldsV1 == nil {
			return nil
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			return nil
		}
		return s
	}
	return nil
}

// withoutNulls removes, in place, the null fields of every object in v.
func withoutNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if isNull(e) {
				delete(t, k)
				continue
			}
			t[k] = withoutNulls(e)
		}
	case []any:
		for i, e := range t {
			t[i] = withoutNulls(e)
		}
	}
	return v
}

// child is owned's set below pe, or nil.
func child(owned *fieldpath.Set, pe fieldpath.PathElement) *fieldpath.Set {
	if owned == nil {
		return nil
	}
	s, ok := owned.Children.Get(pe)
	if !ok {
		return nil
	}
	return s
}

// subset reports whether every field of desired has its value in observed,
// lists compared as owned (the manager's fields at this path, nil if none)
// says (see ServerSide).
func subset(desired, observed any, owned *fieldpath.Set) bool {
	switch d := desired.(type) {
	case map[string]any:
		o, ok := observed.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range d {
			ov, ok := o[k]
			if !ok || !subset(v, ov, child(owned, fieldpath.PathElement{FieldName: &k})) {
				return false
			}
		}
		return true
	case []any:
		o, ok := observed.([]any)
		if !ok {
			return false
		}
		return listSubset(d, o, owned)
	}
	return equal(desired, observed)
}

// listSubset is subset for lists.
func listSubset(desired, observed []any, owned *fieldpath.Set) bool {
	var keys []fieldpath.PathElement
	set := false
	if owned != nil {
		visit := func(pe fieldpath.PathElement) {
			switch {
			case pe.Key != nil:
				keys = append(keys, pe)
			case pe.Value != nil:
				set = true
			}
		}
		owned.Members.Iterate(visit)
		owned.Children.Iterate(visit)
	}
	switch {
	case len(keys) > 0:
		for _, e := range desired {
			m, ok := e.(map[string]any)
			if !ok {
				return false
			}
			pe, ok := matchKey(keys, m)
			if !ok {
				return false // not owned yet
			}
			oe, ok := findKeyed(observed, *pe.Key, false)
			if !ok || !subset(m, oe, child(owned, pe)) {
				return false
			}
		}
		return true
	case set:
		for _, e := range desired {
			if !containsValue(observed, e) {
				return false
			}
		}
		return true
	}
	if len(desired) != len(observed) {
		return false
	}
	for i := range desired {
		if !subset(desired[i], observed[i], nil) {
			return false
		}
	}
	return true
}

// matchKey returns the key among keys that the desired element m has: the
// key fields m sets all equal, at least one set (a key field m leaves out
// is one the server defaulted, a port's protocol say).
func matchKey(keys []fieldpath.PathElement, m map[string]any) (fieldpath.PathElement, bool) {
	for _, pe := range keys {
		if keyMatches(*pe.Key, m, true) {
			return pe, true
		}
	}
	return fieldpath.PathElement{}, false
}

// keyMatches reports whether m has the key's fields: all of them, or with
// lenient those it sets (at least one).
func keyMatches(key value.FieldList, m map[string]any, lenient bool) bool {
	set := 0
	for _, f := range key {
		v, ok := m[f.Name]
		if !ok {
			if lenient {
				continue
			}
			return false
		}
		if !equal(v, f.Value.Unstructured()) {
			return false
		}
		set++
	}
	return set > 0
}

// findKeyed returns the element of list that has key (see keyMatches).
func findKeyed(list []any, key value.FieldList, lenient bool) (map[string]any, bool) {
	for _, e := range list {
		if m, ok := e.(map[string]any); ok && keyMatches(key, m, lenient) {
			return m, true
		}
	}
	return nil, false
}

// containsValue reports whether list has an element equal to v.
func containsValue(list []any, v any) bool {
	for _, e := range list {
		if equal(e, v) {
			return true
		}
	}
	return false
}

// within reports whether every field of owned is in desired. keyFields,
// when owned is the set of a list map's element, names the fields of its
// key: those the server defaulted are owned though desired leaves them out.
func within(owned *fieldpath.Set, desired any, keyFields value.FieldList) bool {
	ok := true
	isKeyField := func(pe fieldpath.PathElement) bool {
		if pe.FieldName == nil {
			return false
		}
		for _, f := range keyFields {
			if f.Name == *pe.FieldName {
				return true
			}
		}
		return false
	}
	owned.Members.Iterate(func(pe fieldpath.PathElement) {
		if ok && !isKeyField(pe) {
			_, ok = find(desired, pe)
		}
	})
	owned.Children.Iterate(func(pe fieldpath.PathElement) {
		if !ok {
			return
		}
		var sub any
		if sub, ok = find(desired, pe); !ok {
			return
		}
		s, _ := owned.Children.Get(pe)
		var kf value.FieldList
		if pe.Key != nil {
			kf = *pe.Key
		}
		ok = within(s, sub, kf)
	})
	return ok
}

// find returns the value of desired at pe.
func find(desired any, pe fieldpath.PathElement) (any, bool) {
	switch {
	case pe.FieldName != nil:
		m, ok := desired.(map[string]any)
		if !ok {
			return nil, false
		}
		v, ok := m[*pe.FieldName]
		return v, ok
	case pe.Key != nil:
		l, ok := desired.([]any)
		if !ok {
			return nil, false
		}
		return findKeyed(l, *pe.Key, true)
	case pe.Value != nil:
		l, ok := desired.([]any)
		if !ok {
			return nil, false
		}
		v := (*pe.Value).Unstructured()
		return v, containsValue(l, v)
	case pe.Index != nil:
		l, ok := desired.([]any)
		if !ok || *pe.Index < 0 || *pe.Index >= len(l) {
			return nil, false
		}
		return l[*pe.Index], true
	}
	return nil, false
}
