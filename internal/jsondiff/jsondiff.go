package jsondiff

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/metactl/metactl/internal/textcut"
)

// Op is what a Change does to a field.
type Op string

const (
	// Add: the field is absent from the old value.
	Add Op = "add"
	// Remove: the field is absent from the new value.
	Remove Op = "remove"
	// Replace: the field is in both, with different values.
	Replace Op = "replace"
)

// Change is one field that differs between two values.
type Change struct {
	// Path names the field from the root: ".spec.replicas",
	// ".spec.containers[0].image", `.metadata.labels["app.kubernetes.io/name"]`
	// (written as jq reads it); "" is the root.
	Path string `json:"path"`
	// Op is what changes.
	Op Op `json:"op"`
	// Old is the old value; nil for Add.
	Old any `json:"old,omitempty"`
	// New is the new value; nil for Remove.
	New any `json:"new,omitempty"`
}

// Diff returns the fields that differ between old and new, ordered by path
// (a field of a map is reported, not each of its leaves, when the map is
// added or removed whole). Equal values return nil.
func Diff(old, new any) []Change {
	var out []Change
	diff(nil, old, new, &out)
	slices.SortStableFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Equal reports whether old and new are equal as JSON (numbers by value).
func Equal(old, new any) bool { return len(Diff(old, new)) == 0 }

// segment is one step of a path: a map key or a list index.
type segment struct {
	key   string
	index int
	isKey bool
}

func diff(path []segment, old, new any, out *[]Change) {
	switch o := old.(type) {
	case map[string]any:
		n, ok := new.(map[string]any)
		if !ok {
			break
		}
		for k, ov := range o {
			p := append(slices.Clip(path), segment{key: k, isKey: true})
			nv, in := n[k]
			if !in {
				*out = append(*out, Change{Path: pathString(p), Op: Remove, Old: ov})
				continue
			}
			diff(p, ov, nv, out)
		}
		for k, nv := range n {
			if _, in := o[k]; !in {
				p := append(slices.Clip(path), segment{key: k, isKey: true})
				*out = append(*out, Change{Path: pathString(p), Op: Add, New: nv})
			}
		}
		return
	case []any:
		n, ok := new.([]any)
		if !ok {
			break
		}
		for i := 0; i < max(len(o), len(n)); i++ {
			p := append(slices.Clip(path), segment{index: i})
			switch {
			case i >= len(n):
				*out = append(*out, Change{Path: pathString(p), Op: Remove, Old: o[i]})
			case i >= len(o):
				*out = append(*out, Change{Path: pathString(p), Op: Add, New: n[i]})
			default:
				diff(p, o[i], n[i], out)
			}
		}
		return
	}
	if !scalarEqual(old, new) {
		*out = append(*out, Change{Path: pathString(path), Op: Replace, Old: old, New: new})
	}
}

// scalarEqual compares two values of which at least one is not a map or a
// list (or whose kinds differ).
func scalarEqual(a, b any) bool {
	if ra, ok := exactNumber(a); ok {
		if rb, ok := exactNumber(b); ok {
			return ra.Cmp(rb) == 0
		}
	}
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && (fa == fb || (math.IsNaN(fa) && math.IsNaN(fb)))
	}
	switch a.(type) {
	case map[string]any, []any:
		return false // b is not of a's kind, or diff would not be here
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// exactNumber returns v as an exact rational when it is a number written
// in full: a json.Number (as a decoder with UseNumber gives them, "2" and
// "2.0" and "2e0" the same value, 9007199254740993 not 9007199254740992)
// or an integer (a json.Number with an exponent over 9999 is not). A
// float64 is not: it has lost digits already, and is
// compared as a float64 (number).
func exactNumber(v any) (*big.Rat, bool) {
	r := new(big.Rat)
	switch n := v.(type) {
	case json.Number:
		// An exponent of more than 4 digits is compared as a float64:
		// 1e99999999 as a rational takes megabytes and seconds.
		if i := strings.IndexAny(string(n), "eE"); i >= 0 && len(strings.TrimLeft(string(n[i+1:]), "+-")) > 4 {
			return nil, false
		}
		if _, ok := r.SetString(string(n)); !ok {
			return nil, false
		}
	case int:
		r.SetInt64(int64(n))
	case int32:
		r.SetInt64(int64(n))
	case int64:
		r.SetInt64(n)
	case uint:
		r.SetUint64(uint64(n))
	case uint32:
		r.SetUint64(uint64(n))
	case uint64:
		r.SetUint64(n)
	default:
		return nil, false
	}
	return r, true
}

// number returns v as a float64 when it is a number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// plainKey is a map key that needs no quoting in a path.
var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// pathString writes a path the way jq and kubectl's JSONPath readers read it: a
// plain key as ".key", any other key quoted as `["key"]`, an index as
// "[i]".
func pathString(p []segment) string {
	var b strings.Builder
	for _, s := range p {
		switch {
		case !s.isKey:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case plainKey.MatchString(s.key):
			b.WriteString("." + s.key)
		default:
			b.WriteString("[" + strconv.Quote(s.key) + "]")
		}
	}
	return b.String()
}

// MaxValueBytes bounds a value as String and Write print it.
const MaxValueBytes = 200

// String prints the change on one line: "~ .spec.replicas: 1 -> 3",
// "+ .data.b: \"x\"", "- .data.a: \"y\"", values as JSON cut to
// MaxValueBytes.
func (c Change) String() string {
	path := c.Path
	if path == "" {
		path = "."
	}
	switch c.Op {
	case Add:
		return "+ " + path + ": " + Value(c.New)
	case Remove:
		return "- " + path + ": " + Value(c.Old)
	default:
		return "~ " + path + ": " + Value(c.Old) + " -> " + Value(c.New)
	}
}

// Value prints v as compact JSON, cut to MaxValueBytes.
func Value(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return textcut.Cut(fmt.Sprint(v), MaxValueBytes)
	}
	return textcut.Cut(string(b), MaxValueBytes)
}

// Write prints changes one per line, each line started by indent.
func Write(w io.Writer, indent string, changes []Change) error {
	for _, c := range changes {
		if _, err := fmt.Fprintln(w, indent+c.String()); err != nil {
			return err
		}
	}
	return nil
}

// ObjectKey names an object in a list of objects by what identifies it in
// a cluster: "apiVersion/kind/namespace/name" ("apiVersion/kind/name" when
// it has no namespace); false when v is not an object with a kind and a
// name.
func ObjectKey(v any) (string, bool) {
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if kind == "" || name == "" {
		return "", false
	}
	if namespace == "" {
		return apiVersion + "/" + kind + "/" + name, true
	}
	return apiVersion + "/" + kind + "/" + namespace + "/" + name, true
}

// ByObjectKey returns list as a map keyed by ObjectKey, so that two lists
// of the same objects in another order compare equal and a changed object
// is named by its key rather than its index. It returns list unchanged,
// and false, when an item is not an object with a kind and a name, or two
// items have the same key.
func ByObjectKey(list []any) (any, bool) {
	out := make(map[string]any, len(list))
	for _, item := range list {
		key, ok := ObjectKey(item)
		if !ok {
			return list, false
		}
		if _, dup := out[key]; dup {
			return list, false
		}
		out[key] = item
	}
	return out, true
}
