package informer

import (
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metactl/metactl/internal/jsonscan"
)

// Pairs is how an Object keeps its labels or annotations: keys and values
// in turn (key, value, key, value, …), each key once. A Go map of one
// entry costs about 330 bytes; Pairs of one entry cost two string headers,
// so a cache of many objects with a label and an annotation each is a
// third smaller. Keys and values of up to internMax bytes are interned (see
// interner): the label and annotation keys and the owners' UIDs that
// thousands of cached objects repeat are mostly stored once.
//
// An Object's Pairs are never written: its setters replace them, and
// DeepCopyObject copies them. The zero value is the empty set. Pairs
// implements labels.Labels, so a selector matches them without building a
// map (see LabelsOf).
type Pairs []string

var _ labels.Labels = Pairs(nil)

// internMax is the longest string (key or value) the interner keeps: UIDs
// (36 bytes) and most label keys and values are shorter; a last-applied
// configuration is not, and is seldom shared.
const internMax = 64

// PairsOf returns m as Pairs; nil for an empty m.
func PairsOf(m map[string]string) Pairs {
	if len(m) == 0 {
		return nil
	}
	p := make(Pairs, 0, 2*len(m))
	for k, v := range m {
		p = append(p, interned.intern(k), interned.intern(v))
	}
	return p
}

// Len returns the number of keys.
func (p Pairs) Len() int { return len(p) / 2 }

// Has reports whether key is set (labels.Labels).
func (p Pairs) Has(key string) bool {
	_, ok := p.Lookup(key)
	return ok
}

// Get returns the value of key, "" if unset (labels.Labels).
func (p Pairs) Get(key string) string {
	v, _ := p.Lookup(key)
	return v
}

// Lookup returns the value of key and whether it is set.
func (p Pairs) Lookup(key string) (string, bool) {
	for i := 0; i+1 < len(p); i += 2 {
		if p[i] == key {
			return p[i+1], true
		}
	}
	return "", false
}

// Map returns the pairs as a new map that the caller owns; nil when there
// are none.
func (p Pairs) Map() map[string]string {
	if len(p) == 0 {
		return nil
	}
	return toMap(p, func(v string) string { return v })
}

// unstructured returns the pairs as a new map of an unstructured object.
func (p Pairs) unstructured() map[string]any {
	return toMap(p, func(v string) any { return v })
}

// toMap returns the pairs as a new map of values value(v).
func toMap[V any](p Pairs, value func(string) V) map[string]V {
	m := make(map[string]V, len(p)/2)
	for i := 0; i+1 < len(p); i += 2 {
		m[p[i]] = value(p[i+1])
	}
	return m
}

// String returns the pairs as labels.Set prints them (sorted, k=v,…).
func (p Pairs) String() string { return labels.Set(p.Map()).String() }

// UnmarshalJSON decodes a JSON object whose values are strings or null, or
// null, into what encoding/json decodes it into a map[string]string: a
// null value is "", escapes and invalid UTF-8 are encoding/json's, and a
// key given twice keeps its last value. The syntax has been checked by the
// decoder that calls it. Keys in increasing order (as the API server,
// which encodes a Go map, sends them) are appended as they come; others
// are set through a map, so decoding takes linear time either way.
func (p *Pairs) UnmarshalJSON(data []byte) error {
	i := jsonscan.SkipSpace(data, 0)
	if i < len(data) && data[i] == 'n' {
		*p = nil
		return nil
	}
	if i >= len(data) || data[i] != '{' {
		return fmt.Errorf("want a JSON object of strings")
	}
	var out Pairs
	var unordered map[string]string
	for i = jsonscan.SkipSpace(data, i+1); i < len(data) && data[i] != '}'; {
		key, end, err := stringAt(data, i)
		if err != nil {
			return err
		}
		i = jsonscan.SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return fmt.Errorf("offset %d: want ':'", i)
		}
		value, end, err := stringAt(data, jsonscan.SkipSpace(data, i+1))
		if err != nil {
			return err
		}
		switch {
		case unordered != nil:
			unordered[key] = value
		case len(out) == 0 || out[len(out)-2] < key:
			out = append(out, key, value)
		default:
			unordered = out.Map()
			unordered[key] = value
		}
		i = jsonscan.SkipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = jsonscan.SkipSpace(data, i+1)
		}
	}
	if i >= len(data) {
		return fmt.Errorf("unexpected end of JSON")
	}
	if unordered != nil { // its strings are interned already
		out = make(Pairs, 0, 2*len(unordered))
		for k, v := range unordered {
			out = append(out, k, v)
		}
	}
	*p = out
	return nil
}

// stringAt decodes the JSON string or null at data[i:], interned (a null
// is ""), and returns it with the offset just after it. Strings
// without escapes are looked up in the interner without a copy.
func stringAt(data []byte, i int) (string, int, error) {
	end, err := jsonscan.SkipValue(data, i)
	if err != nil {
		return "", 0, err
	}
	raw := data[i:end]
	if string(raw) == "null" {
		return "", end, nil
	}
	if len(raw) < 2 || raw[0] != '"' {
		return "", 0, fmt.Errorf("offset %d: want a string", i)
	}
	if content := raw[1 : len(raw)-1]; plain(content) {
		return interned.internBytes(content), end, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", 0, err
	}
	return interned.intern(s), end, nil
}

// plain reports whether the content of a JSON string is the string itself:
// no escapes and valid UTF-8.
func plain(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii || utf8.Valid(b)
}

// stringTable keeps one copy of the strings many cached objects repeat.
// Its one implementation is interner; it is an interface so that a test
// can measure unique.Make in its place (BenchmarkRetainedBytesPerObject).
type stringTable interface {
	// intern returns the table's copy of s, or s.
	intern(s string) string
	// internBytes returns the table's copy of string(b), or a new one.
	// It does not keep b.
	internBytes(b []byte) string
}

// interned is the string table of every cache.
var interned stringTable = &interner{max: internMaxEntries}

// internMaxEntries bounds the interner: at most this many strings of at
// most internMax bytes, about 2 MiB.
const internMaxEntries = 16384

// interner keeps one copy of the short strings that many cached objects
// repeat: label and annotation keys, namespaces, kinds, owners' UIDs. It
// holds at most max strings of at most internMax bytes; when full it
// starts over empty, so an object decoded after that shares its strings
// with objects decoded after it, not before (nothing is wrong, only less
// is shared). Its strings live as long as the interner or an object holds
// them. Safe for concurrent use.
//
// It stays instead of unique.Make(s).Value() (issue 30) because the cache
// keeps strings, not unique.Handles: once no Handle is held, a collection
// drops unique's entry and the next Make of the same bytes returns a new
// copy (TestInternedStringsOutliveGC), so objects decoded in different
// collection cycles share nothing. Both take about 20-25 ns and 0
// allocations a lookup (BenchmarkInternBytes, BenchmarkUniqueMake). Live
// heap per cached object, interner against unique, for 10,000 ConfigMaps
// shaped like test/bench's children (`go test -run XXX -bench
// RetainedBytes ./pkg/dynamic/informer/`, medians of 3 rounds): collecting
// every 1,000 objects, as while a cache fills from a list, 1,103 against
// 1,095 bytes (this map costs what it shares beyond unique); every 10,
// 1,100 against 1,105; every object, as for objects that arrive one by one
// over a long run, 1,100 against 1,252 (12 % less). See
// docs/performance.md, "Issue 30: the interner against unique".
type interner struct {
	mu  sync.Mutex
	max int
	m   map[string]string
}

// intern returns the interner's copy of s, adding s if it is at most
// internMax bytes long.
func (t *interner) intern(s string) string {
	if s == "" || len(s) > internMax {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[s]; ok {
		return c
	}
	t.addLocked(s)
	return s
}

// internBytes returns the interner's copy of string(b); a string of more
// than internMax bytes is a new copy.
func (t *interner) internBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > internMax {
		return string(b)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[string(b)]; ok { // no copy for the lookup
		return c
	}
	s := string(b)
	t.addLocked(s)
	return s
}

func (t *interner) addLocked(s string) {
	if t.m == nil || len(t.m) >= t.max {
		t.m = make(map[string]string, min(t.max, 1024))
	}
	t.m[s] = s
}

// LabelsOf returns obj's labels for a selector to match or a lookup: an
// Object's Pairs as they are, without building a map.
func LabelsOf(obj metav1.Object) labels.Labels {
	if o, ok := obj.(*Object); ok {
		return o.Labels
	}
	return labels.Set(obj.GetLabels())
}

// AnnotationsOf is LabelsOf for obj's annotations.
func AnnotationsOf(obj metav1.Object) labels.Labels {
	if o, ok := obj.(*Object); ok {
		return o.Annotations
	}
	return labels.Set(obj.GetAnnotations())
}
