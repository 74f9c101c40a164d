// Package jsondiff compares two JSON values field by field, for the tools
// that show a hook author what changes: `metactl plan` (a child as it is
// against the child as metactl would write it), `metactl replay` (a
// recorded answer against a new one) and `metactl hook test` (two answers
// to the same request).
//
// Values are what encoding/json decodes into any (map[string]any, []any,
// string, float64, json.Number, bool, nil) or what unstructured objects
// hold (int64 and the like as well). Numbers compare by value, whatever
// their Go type: 3, int64(3) and 3.0 are the same; two json.Numbers (decode
// with UseNumber) or integers compare exactly (9007199254740993 is not
// 9007199254740992), a float64 with anything as a float64. Lists compare by index,
// unless the caller turns a list of objects into a map first (ByObjectKey),
// as the answers' lists of children are sets, not sequences.
package jsondiff
