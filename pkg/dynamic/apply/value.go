package apply

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// This file holds the helpers that treat a Go value as a JSON value: which
// values are accepted, how they are copied and when two of them are equal.
//
// A JSON value here is one of: nil (JSON null), bool, string, a number
// (any Go integer or floating-point type, or encoding/json.Number),
// map[string]any (object) and []any (array). A nil map[string]any or []any
// is JSON null, as encoding/json marshals it.

// isNull reports whether v is JSON null: an untyped nil or a nil object or
// array.
func isNull(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return t == nil
	case []any:
		return t == nil
	}
	return false
}

// pathError reports a value that is not a JSON value, with the path to it.
type pathError struct {
	path []string // innermost segment last
	msg  string
}

func (e *pathError) Error() string {
	if len(e.path) == 0 {
		return e.msg
	}
	var b strings.Builder
	for i, p := range e.path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String() + ": " + e.msg
}

// withParent prepends seg to the path of err, which must be a *pathError.
func withParent(err error, seg string) error {
	pe := err.(*pathError)
	pe.path = append([]string{seg}, pe.path...)
	return pe
}

// validate returns an error naming the first value found in v that is not a
// JSON value, or a number that JSON cannot represent (NaN, ±Inf, or a
// malformed json.Number).
func validate(v any) error {
	switch t := v.(type) {
	case nil, bool, string:
		return nil
	case map[string]any:
		for k, e := range t {
			if err := validate(e); err != nil {
				return withParent(err, k)
			}
		}
		return nil
	case []any:
		for i, e := range t {
			if err := validate(e); err != nil {
				return withParent(err, "["+strconv.Itoa(i)+"]")
			}
		}
		return nil
	}
	if _, ok := toNumber(v); ok {
		return nil
	}
	if n, ok := v.(json.Number); ok {
		return &pathError{msg: fmt.Sprintf("invalid number %q", string(n))}
	}
	if f, ok := v.(float64); ok {
		return &pathError{msg: fmt.Sprintf("number %v cannot be represented in JSON", f)}
	}
	if f, ok := v.(float32); ok {
		return &pathError{msg: fmt.Sprintf("number %v cannot be represented in JSON", f)}
	}
	return &pathError{msg: fmt.Sprintf("unsupported value of type %T", v)}
}

// deepCopy returns a copy of the JSON value v that shares no map or slice
// with v. Scalars are immutable and returned as they are.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if t == nil {
			return t
		}
		c := make(map[string]any, len(t))
		for k, e := range t {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		if t == nil {
			return t
		}
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

// numKind tells how a number is held in a number value.
type numKind uint8

const (
	numInt   numKind = iota + 1 // an integer in the int64 range, in i
	numUint                     // an integer above math.MaxInt64, in u
	numFloat                    // any other finite number, in f
)

// number is the canonical form of a JSON number: two Go values denote the
// same JSON number exactly when their canonical forms are equal. An
// integral float64 such as 3.0 is held as the integer 3, so that
// int64(3) and float64(3) compare equal, while int64(1<<53+1) and
// float64(1<<53) (which differ) do not.
type number struct {
	kind numKind
	i    int64
	u    uint64
	f    float64
}

// twoTo63 is 2^63 as a float64, the first float64 above the int64 range.
const twoTo63 = float64(1 << 63)

func floatNumber(f float64) (number, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return number{}, false
	}
	if f == math.Trunc(f) {
		switch {
		case f >= -twoTo63 && f < twoTo63:
			return number{kind: numInt, i: int64(f)}, true
		case f >= twoTo63 && f < 2*twoTo63:
			return number{kind: numUint, u: uint64(f)}, true
		}
	}
	return number{kind: numFloat, f: f}, true
}

func uintNumber(u uint64) number {
	if u <= math.MaxInt64 {
		return number{kind: numInt, i: int64(u)}
	}
	return number{kind: numUint, u: u}
}

// toNumber returns the canonical form of v if v is a finite number.
func toNumber(v any) (number, bool) {
	switch t := v.(type) {
	case int64:
		return number{kind: numInt, i: t}, true
	case float64:
		return floatNumber(t)
	case int:
		return number{kind: numInt, i: int64(t)}, true
	case int8:
		return number{kind: numInt, i: int64(t)}, true
	case int16:
		return number{kind: numInt, i: int64(t)}, true
	case int32:
		return number{kind: numInt, i: int64(t)}, true
	case uint:
		return uintNumber(uint64(t)), true
	case uint8:
		return uintNumber(uint64(t)), true
	case uint16:
		return uintNumber(uint64(t)), true
	case uint32:
		return uintNumber(uint64(t)), true
	case uint64:
		return uintNumber(t), true
	case uintptr:
		return uintNumber(uint64(t)), true
	case float32:
		return floatNumber(float64(t))
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return number{kind: numInt, i: i}, true
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return uintNumber(u), true
		}
		if !validJSONNumber(string(t)) {
			return number{}, false
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return number{}, false
		}
		return floatNumber(f)
	}
	return number{}, false
}

// validJSONNumber reports whether s has the syntax of a JSON number
// (strconv.ParseFloat also accepts forms such as "0x1p3", "Inf" and "1_0").
func validJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// Equal reports whether a and b are the same JSON value, as equal does:
// numbers by value whatever their Go type, objects key by key.
func Equal(a, b any) bool { return equal(a, b) }

// equal reports whether a and b are the same JSON value: numbers compare by
// value whatever their Go type (int64(3) equals float64(3)), a nil map or
// slice equals nil, objects compare key by key and arrays element by
// element. Values that are not JSON values compare with reflect.DeepEqual.
func equal(a, b any) bool {
	switch at := a.(type) {
	case nil:
		return isNull(b)
	case string:
		bt, ok := b.(string)
		return ok && at == bt
	case bool:
		bt, ok := b.(bool)
		return ok && at == bt
	case map[string]any:
		if at == nil {
			return isNull(b)
		}
		bt, ok := b.(map[string]any)
		if !ok || bt == nil || len(at) != len(bt) {
			return false
		}
		for k, av := range at {
			bv, ok := bt[k]
			if !ok || !equal(av, bv) {
				return false
			}
		}
		return true
	case []any:
		if at == nil {
			return isNull(b)
		}
		bt, ok := b.([]any)
		if !ok || bt == nil || len(at) != len(bt) {
			return false
		}
		for i := range at {
			if !equal(at[i], bt[i]) {
				return false
			}
		}
		return true
	}
	if an, ok := toNumber(a); ok {
		bn, ok := toNumber(b)
		return ok && an == bn
	}
	return reflect.DeepEqual(a, b)
}
