package informer

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
	"unique"

	"github.com/metactl/metactl/pkg/dynamic/internal/jsonscan"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Pairs is how an Object keeps its labels or annotations: keys and values
// in turn (key, value, key, value, …), in the order the API server sent
// them, each key once. A Go map of one entry costs about 330 bytes; Pairs
// of one entry cost two string headers, so a cache of many objects with a
// label and an annotation each is a third smaller. Keys, and values of up
// to internMax bytes, are interned: the label and annotation keys and the
// owners' UIDs repeated over thousands of cached objects are stored once.
//
// Pairs are immutable: an Object's setters replace them, never write them.
// The zero value is the empty set. Pairs implements labels.Labels, so a
// selector matches them without building a map (see LabelsOf).
type Pairs []string

var _ labels.Labels = Pairs(nil)

// internMax is the longest value Pairs interns: UIDs (36 bytes) and most
// label values are shorter; a last-applied configuration is not, and is
// seldom shared.
const internMax = 64

// PairsOf returns m as Pairs; nil for an empty m.
func PairsOf(m map[string]string) Pairs {
	if len(m) == 0 {
		return nil
	}
	p := make(Pairs, 0, 2*len(m))
	for k, v := range m {
		p = append(p, intern(k), internValue(v))
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
	m := make(map[string]string, len(p)/2)
	for i := 0; i+1 < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

// unstructured returns the pairs as a new map of an unstructured object.
func (p Pairs) unstructured() map[string]any {
	m := make(map[string]any, len(p)/2)
	for i := 0; i+1 < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

// String returns the pairs as labels.Set prints them (sorted, k=v,…).
func (p Pairs) String() string { return labels.Set(p.Map()).String() }

// UnmarshalJSON decodes a JSON object of strings, or null, as the decoder
// of metav1.ObjectMeta would decode it into a map: escapes and invalid
// UTF-8 are handled by encoding/json, and a key given twice keeps its last
// value.
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
		out = out.with(intern(key), internValue(value))
		i = jsonscan.SkipSpace(data, end)
		if i < len(data) && data[i] == ',' {
			i = jsonscan.SkipSpace(data, i+1)
		}
	}
	if i >= len(data) {
		return fmt.Errorf("unexpected end of JSON")
	}
	*p = out
	return nil
}

// with returns p with key set to value, in place of an earlier value.
func (p Pairs) with(key, value string) Pairs {
	for i := 0; i+1 < len(p); i += 2 {
		if p[i] == key {
			p[i+1] = value
			return p
		}
	}
	return append(p, key, value)
}

// stringAt decodes the JSON string at data[i:] and returns it with the
// offset just after it.
func stringAt(data []byte, i int) (string, int, error) {
	end, err := jsonscan.SkipValue(data, i)
	if err != nil {
		return "", 0, err
	}
	raw := data[i:end]
	if len(raw) < 2 || raw[0] != '"' {
		return "", 0, fmt.Errorf("offset %d: want a string", i)
	}
	if plain(raw[1 : len(raw)-1]) {
		return string(raw[1 : len(raw)-1]), end, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", 0, err
	}
	return s, end, nil
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

// intern returns the canonical copy of s (unique.Make), so that strings
// repeated over many cached objects are stored once. Interned strings are
// freed once no object holds them.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// internValue interns s if it is at most internMax bytes long.
func internValue(s string) string {
	if len(s) > internMax {
		return s
	}
	return intern(s)
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
