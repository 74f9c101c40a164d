package apply

// OnlyAddedByOthers reports whether observed differs from merged (the
// result of Apply over observed) only where observed's lists hold
// elements merged's do not: each list of merged is, element for element
// and in order, a subsequence of observed's list at the same path, and
// everything else is equal (numbers by value). That is a difference the
// hook did not ask for: elements that the API server's defaulting or
// admission (a Pod's default tolerations), or another writer, added to a
// list the hook sets, which the merge replaces wholesale. A change of the
// hook's own desired state always changes the last applied annotation, so
// it is never such a difference.
//
// Recreating a child for such a difference would not remove it (the server
// adds it again) and would loop; the caller keeps the child instead.
func OnlyAddedByOthers(observed, merged map[string]any) bool {
	return extends(observed, merged)
}

// extends reports whether o equals m but for extra elements in lists of o.
func extends(o, m any) bool {
	switch mt := m.(type) {
	case map[string]any:
		ot, ok := o.(map[string]any)
		if !ok || mt == nil || ot == nil || len(ot) != len(mt) {
			return equal(o, m)
		}
		for k, mv := range mt {
			ov, ok := ot[k]
			if !ok || !extends(ov, mv) {
				return false
			}
		}
		return true
	case []any:
		ot, ok := o.([]any)
		if !ok || mt == nil || ot == nil {
			return equal(o, m)
		}
		// Greedy: each element of m matched to the first element of o
		// after the previous match that it extends.
		j := 0
		for _, mv := range mt {
			for j < len(ot) && !extends(ot[j], mv) {
				j++
			}
			if j == len(ot) {
				return false
			}
			j++
		}
		return true
	}
	return equal(o, m)
}
