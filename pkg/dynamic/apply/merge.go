package apply

import "fmt"

// listMapKeys are the fields that identify the elements of a list of
// objects, in order of precedence (see chooseKey).
var listMapKeys = [...]string{"containerPort", "port", "mountPath", "name", "uid", "ip", "path"}

// Merge returns the three-way merge of observed, lastApplied and desired:
// observed, changed so that every field of desired is set and every field
// that lastApplied has but desired no longer has is removed. Fields that
// neither lastApplied nor desired mention keep observed's value. The rules,
// applied recursively from the top-level objects down, are those described
// in the package documentation.
//
// A nil observed, lastApplied or desired counts as an empty object.
//
// Merge is a pure function: it never modifies its arguments, and the result
// shares no map or slice with them, so either side may be modified
// afterwards without affecting the other. It is deterministic: the same
// arguments give equal results (including the order of list elements).
//
// Merge fails only when an argument holds something that is not a JSON
// value (see the package documentation); the error names the argument and
// the path to the value. The result is then nil.
func Merge(observed, lastApplied, desired map[string]any) (map[string]any, error) {
	args := [...]struct {
		name string
		obj  map[string]any
	}{{"observed", observed}, {"lastApplied", lastApplied}, {"desired", desired}}
	for _, a := range args {
		if err := validate(a.obj); err != nil {
			return nil, fmt.Errorf("merge: %s: %w", a.name, err)
		}
	}
	return mergeMap(observed, lastApplied, desired), nil
}

// mergeMap merges the objects observed, lastApplied and desired (any of
// which may be nil) into a new object.
func mergeMap(observed, lastApplied, desired map[string]any) map[string]any {
	res := make(map[string]any, len(observed)+len(desired))
	for k, v := range observed {
		if _, ok := desired[k]; ok {
			continue // set or deleted below
		}
		if _, ok := lastApplied[k]; ok {
			continue // we set it before and no longer want it
		}
		res[k] = deepCopy(v)
	}
	for k, v := range desired {
		if isNull(v) {
			// null deletes; a field observed holds as null is null
			// already (the API server keeps nulls where a schema allows
			// them), and keeping it saves a write that changes nothing.
			if o, ok := observed[k]; ok && isNull(o) {
				res[k] = nil
			}
			continue
		}
		res[k] = mergeValue(observed[k], lastApplied[k], v)
	}
	return res
}

// mergeValue merges desired, which must not be null, onto observed and
// returns the new value. observed and lastApplied may be nil (absent) or of
// another type than desired; a lastApplied value of another type than
// desired is ignored.
func mergeValue(observed, lastApplied, desired any) any {
	switch d := desired.(type) {
	case map[string]any:
		o, _ := observed.(map[string]any)
		l, _ := lastApplied.(map[string]any)
		return mergeMap(o, l, d)
	case []any:
		o, oList := observed.([]any)
		l, lList := lastApplied.([]any)
		if key := chooseKey(d, o, oList, l, lList); key != "" {
			return mergeListMap(o, l, d, key)
		}
		return pruneList(d)
	}
	return desired // a scalar: immutable, so no copy needed
}

// pruneList returns a copy of the desired list with the null fields of its
// objects removed, at any depth. Null elements stay (as nil).
func pruneList(desired []any) []any {
	res := make([]any, len(desired))
	for i, e := range desired {
		if !isNull(e) {
			res[i] = mergeValue(nil, nil, e)
		}
	}
	return res
}

// keyVal is the identity of a list element: the scalar value of its merge
// key, in a comparable form where equal JSON values are equal Go values.
type keyVal struct {
	kind byte // 's' string, 'b' bool, 'n' number
	s    string
	b    bool
	n    number
}

// scalarKey returns the keyVal of v, if v is a string, a bool or a finite
// number. Null, objects and arrays are never merge keys.
func scalarKey(v any) (keyVal, bool) {
	switch t := v.(type) {
	case string:
		return keyVal{kind: 's', s: t}, true
	case bool:
		return keyVal{kind: 'b', b: t}, true
	}
	if n, ok := toNumber(v); ok {
		return keyVal{kind: 'n', n: n}, true
	}
	return keyVal{}, false
}

// elemKey returns the keyVal of the list element e under key; e must be an
// object with a scalar value at key (as chooseKey checks).
func elemKey(e any, key string) keyVal {
	k, _ := scalarKey(e.(map[string]any)[key])
	return k
}

// chooseKey returns the merge key under which the desired list merges as a
// list map with the observed and lastApplied lists (each taking part only if
// it is a list), or "" if it must replace the observed list wholesale.
//
// Every element of every taking-part list must be a (non-null) object. The
// key is then the first of listMapKeys that every element has, with a
// string, bool or number value, unique within each list. Requiring
// uniqueness (rather than falling back to replacing the list when the first
// key present everywhere has duplicates) is what keeps Merge idempotent:
// merging the result again with lastApplied = desired picks a key that pairs
// the elements the same way.
func chooseKey(desired, observed []any, oList bool, lastApplied []any, lList bool) string {
	lists := make([][]any, 0, 3)
	lists = append(lists, desired)
	if oList {
		lists = append(lists, observed)
	}
	if lList {
		lists = append(lists, lastApplied)
	}
	for _, list := range lists {
		for _, e := range list {
			if m, ok := e.(map[string]any); !ok || m == nil {
				return ""
			}
		}
	}
	for _, key := range listMapKeys {
		ok := true
		for _, list := range lists {
			if !uniqueKey(list, key) {
				ok = false
				break
			}
		}
		if ok {
			return key
		}
	}
	return ""
}

// smallList is the length up to which lists are searched linearly rather
// than through a map.
const smallList = 8

// uniqueKey reports whether every element of list (all objects) has a
// scalar value at key, and no two elements have the same value.
func uniqueKey(list []any, key string) bool {
	var buf [smallList]keyVal
	keys := buf[:0]
	for _, e := range list {
		k, ok := scalarKey(e.(map[string]any)[key])
		if !ok {
			return false
		}
		keys = append(keys, k)
	}
	if len(keys) <= smallList {
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if keys[i] == keys[j] {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[keyVal]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup {
			return false
		}
		seen[k] = struct{}{}
	}
	return true
}

// keyIndex finds the element of a list (as accepted by chooseKey) that has
// a given key value.
type keyIndex struct {
	list []any
	key  string
	idx  map[keyVal]int // nil for small lists
}

func newKeyIndex(list []any, key string) keyIndex {
	ki := keyIndex{list: list, key: key}
	if len(list) > smallList {
		ki.idx = make(map[keyVal]int, len(list))
		for i, e := range list {
			ki.idx[elemKey(e, key)] = i
		}
	}
	return ki
}

// find returns the element with key value k, or nil.
func (ki keyIndex) find(k keyVal) map[string]any {
	if ki.idx != nil {
		if i, ok := ki.idx[k]; ok {
			return ki.list[i].(map[string]any)
		}
		return nil
	}
	for _, e := range ki.list {
		if elemKey(e, ki.key) == k {
			return e.(map[string]any)
		}
	}
	return nil
}

// mergeListMap merges lists of objects keyed by key (see chooseKey). The
// result keeps observed's order, as metacontroller does, so that a list
// someone else wrote in another order than desired's is not rewritten:
// each observed element in turn is replaced by the desired element of the
// same key merged with it (and with the lastApplied element of that key),
// dropped if lastApplied has its key but desired has not, or kept as it is
// if neither has its key. The desired elements that observed lacks follow,
// in desired's order.
func mergeListMap(observed, lastApplied, desired []any, key string) []any {
	obs := newKeyIndex(observed, key)
	last := newKeyIndex(lastApplied, key)
	want := newKeyIndex(desired, key)
	res := make([]any, 0, len(desired)+len(observed))
	for _, e := range observed {
		k := elemKey(e, key)
		if d := want.find(k); d != nil {
			res = append(res, mergeMap(e.(map[string]any), last.find(k), d))
			continue
		}
		if last.find(k) != nil {
			continue
		}
		res = append(res, deepCopy(e))
	}
	for _, e := range desired {
		k := elemKey(e, key)
		if obs.find(k) != nil {
			continue
		}
		res = append(res, mergeMap(nil, last.find(k), e.(map[string]any)))
	}
	return res
}
