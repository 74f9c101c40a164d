package informer

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Object is how the cache holds an object of any resource: its metadata
// parsed (so that handlers, indexes and selectors read it without decoding
// anything), and everything else kept as the JSON the API server sent. A
// decoded object (unstructured.Unstructured) costs about three times the
// memory of its JSON; objects are decoded when a controller reads them
// (Unstructured), not when they enter the cache.
//
// An Object is immutable once built: its body is never written, and
// DeepCopyObject shares it.
type Object struct {
	metav1.TypeMeta
	// ObjectMeta is the object's metadata without managedFields, which
	// metactl never reads and which are often the largest part of an
	// object.
	metav1.ObjectMeta
	// body is the object's JSON without metadata and managedFields.
	body []byte
}

var _ metav1.Object = &Object{}

// NewObject parses the JSON of one object, as the API server sends it. It
// keeps a copy of what it needs: data may be reused afterwards.
func NewObject(data []byte) (*Object, error) {
	fields, err := topLevelFields(data)
	if err != nil {
		return nil, err
	}
	return newObjectFromFields(data, fields)
}

// newObjectFromFields is NewObject once the top level of data is scanned.
func newObjectFromFields(data []byte, fields fields) (*Object, error) {
	o := &Object{}
	body := make([]byte, 0, len(data)-(fields.metadata.end-fields.metadata.start))
	if fields.metadata.start > 0 {
		metadata := data[fields.metadata.start:fields.metadata.end]
		// managedFields are not decoded at all: they are often most of the
		// metadata, and their timestamps are slow to parse.
		if inner, err := topLevelFields(metadata); err == nil && inner.managedFields.start > 0 {
			metadata = appendWithout(make([]byte, 0, len(metadata)), metadata, inner.managedFields)
		}
		if err := utiljson.Unmarshal(metadata, &o.ObjectMeta); err != nil {
			return nil, fmt.Errorf("decoding metadata: %w", err)
		}
		o.ManagedFields = nil
		body = appendWithout(body, data, fields.metadata)
	} else {
		body = append(body, data...)
	}
	o.APIVersion, o.Kind = fields.apiVersion, fields.kind
	o.body = body
	return o, nil
}

// DeepCopyObject implements runtime.Object. The copy shares the immutable
// body.
func (o *Object) DeepCopyObject() runtime.Object {
	c := &Object{TypeMeta: o.TypeMeta, body: o.body}
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// Unstructured decodes the object. Every call returns a new object that the
// caller owns.
func (o *Object) Unstructured() (*unstructured.Unstructured, error) {
	content := map[string]any{}
	if err := utiljson.Unmarshal(o.body, &content); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", o.Kind, o.key(), err)
	}
	metadata, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.ObjectMeta)
	if err != nil {
		return nil, fmt.Errorf("converting the metadata of %s %s: %w", o.Kind, o.key(), err)
	}
	content["metadata"] = metadata
	if o.APIVersion != "" {
		content["apiVersion"] = o.APIVersion
	}
	if o.Kind != "" {
		content["kind"] = o.Kind
	}
	return &unstructured.Unstructured{Object: content}, nil
}

func (o *Object) key() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// objectList is a list response: its metadata and its items.
type objectList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []Object
}

// newObjectList parses a list response. Items that do not say their kind
// (built-in resources' lists leave it out) get the list's, without "List".
func newObjectList(data []byte) (*objectList, error) {
	fields, err := topLevelFields(data)
	if err != nil {
		return nil, err
	}
	l := &objectList{TypeMeta: metav1.TypeMeta{APIVersion: fields.apiVersion, Kind: fields.kind}}
	if fields.metadata.start > 0 {
		if err := utiljson.Unmarshal(data[fields.metadata.start:fields.metadata.end], &l.ListMeta); err != nil {
			return nil, fmt.Errorf("decoding list metadata: %w", err)
		}
	}
	if fields.items.start == 0 || data[fields.items.start] == 'n' { // absent or null
		return l, nil
	}
	items := data[fields.items.start:fields.items.end]
	if items[0] != '[' {
		return nil, errors.New("items: not a JSON array")
	}
	itemKind := strings.TrimSuffix(l.Kind, "List")
	for i := skipSpace(items, 1); i < len(items) && items[i] != ']'; {
		end, err := skipValue(items, i)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		itemFields, err := topLevelFields(items[i:end])
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", len(l.Items), err)
		}
		obj, err := newObjectFromFields(items[i:end], itemFields)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", len(l.Items), err)
		}
		if obj.Kind == "" {
			obj.APIVersion, obj.Kind = l.APIVersion, itemKind
		}
		l.Items = append(l.Items, *obj)
		i = skipSpace(items, end)
		if i < len(items) && items[i] == ',' {
			i = skipSpace(items, i+1)
		}
	}
	return l, nil
}

// DeepCopyObject implements runtime.Object.
func (l *objectList) DeepCopyObject() runtime.Object {
	c := &objectList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]Object, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Object)
	}
	return c
}

// span locates one top-level field of a JSON object: keyStart is where its
// key's opening quote is, [start, end) its value; prevComma and nextComma
// are the offsets of the commas before and after it (0 when none).
type span struct {
	keyStart, start, end int
	prevComma, nextComma int
}

// appendWithout appends to dst the JSON object data without the field at s
// and the comma that separates it from a neighbour.
func appendWithout(dst, data []byte, s span) []byte {
	cutStart, cutEnd := s.keyStart, s.end
	if s.nextComma > 0 {
		cutEnd = s.nextComma + 1
	} else if s.prevComma > 0 {
		cutStart = s.prevComma
	}
	return append(append(dst, data[:cutStart]...), data[cutEnd:]...)
}

// fields are what topLevelFields finds in an object: in an object or a
// list, metadata, items, apiVersion and kind; in a watch event, type and
// object.
type fields struct {
	metadata, items, object     span
	managedFields               span // in a metadata object
	apiVersion, kind, eventType string
}

var errNotAnObject = errors.New("not a JSON object")

// topLevelFields scans one JSON object's top level, without decoding the
// values: it locates metadata and items and reads apiVersion and kind.
func topLevelFields(data []byte) (fields, error) {
	var f fields
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return f, errNotAnObject
	}
	i = skipSpace(data, i+1)
	prevComma := 0
	var last *span
	if i < len(data) && data[i] == '}' {
		if skipSpace(data, i+1) != len(data) {
			return f, fmt.Errorf("offset %d: data after the object", i+1)
		}
		return f, nil
	}
	for i < len(data) {
		keyStart := i
		keyEnd, err := skipString(data, i)
		if err != nil {
			return f, err
		}
		key := data[keyStart+1 : keyEnd-1]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return f, fmt.Errorf("offset %d: want ':'", i)
		}
		valueStart := skipSpace(data, i+1)
		valueEnd, err := skipValue(data, valueStart)
		if err != nil {
			return f, err
		}
		s := span{keyStart: keyStart, start: valueStart, end: valueEnd, prevComma: prevComma}
		last = nil
		switch string(key) {
		case "metadata":
			f.metadata = s
			last = &f.metadata
		case "managedFields":
			f.managedFields = s
			last = &f.managedFields
		case "items":
			f.items = s
		case "apiVersion":
			f.apiVersion = plainString(data[valueStart:valueEnd])
		case "kind":
			f.kind = plainString(data[valueStart:valueEnd])
		case "object":
			f.object = s
		case "type":
			f.eventType = plainString(data[valueStart:valueEnd])
		}
		i = skipSpace(data, valueEnd)
		if i >= len(data) {
			break
		}
		switch data[i] {
		case ',':
			if last != nil {
				last.nextComma = i
			}
			prevComma = i
			i = skipSpace(data, i+1)
		case '}':
			if skipSpace(data, i+1) != len(data) {
				return f, fmt.Errorf("offset %d: data after the object", i+1)
			}
			return f, nil
		default:
			return f, fmt.Errorf("offset %d: want ',' or '}'", i)
		}
	}
	return f, fmt.Errorf("unexpected end of JSON")
}

// plainString returns the content of a JSON string without escapes and in
// valid UTF-8, else "" (apiVersion and kind are always plain; the rest is
// left to the decoder, which replaces invalid UTF-8).
func plainString(v []byte) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || !utf8.Valid(v) {
		return ""
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' {
			return ""
		}
	}
	return string(v[1 : len(v)-1])
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset just after the JSON string starting at i.
func skipString(data []byte, i int) (int, error) {
	if i >= len(data) || data[i] != '"' {
		return 0, fmt.Errorf("offset %d: want a string", i)
	}
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string")
}

// skipValue returns the offset just after the JSON value starting at i. It
// checks nesting and strings, not the syntax of numbers and literals: the
// values it skips are decoded, and so checked, later.
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, fmt.Errorf("unexpected end of JSON")
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				end, err := skipString(data, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unexpected end of JSON")
	default:
		start := i
		for i < len(data) && data[i] != ',' && data[i] != '}' && data[i] != ']' && data[i] != ' ' && data[i] != '\n' && data[i] != '\t' && data[i] != '\r' {
			i++
		}
		if i == start {
			return 0, fmt.Errorf("offset %d: want a value", i)
		}
		return i, nil
	}
}
