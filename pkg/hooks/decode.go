/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/metactl/metactl/internal/jsonscan"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// Response is a hook answer that hookclient.Client.Call can decode: *CompositeSyncResponse,
// *DecoratorSyncResponse or *CustomizeResponse.
type Response interface {
	// DecodeHookResponse replaces the receiver with the response in body,
	// decoded in mode (anything but strict counts as loose), and checks
	// that it is well formed. On error the receiver is left zero.
	DecodeHookResponse(body []byte, mode v1alpha1.ResponseUnMarshallMode) error
}

var (
	_ Response = (*CompositeSyncResponse)(nil)
	_ Response = (*DecoratorSyncResponse)(nil)
	_ Response = (*CustomizeResponse)(nil)
)

// compositeSyncResponseJSON is the wire form of CompositeSyncResponse. Its
// fields are exactly the protocol's, so that strict mode rejects any other
// top-level key; status and children are decoded generically and checked
// afterwards, for errors that name what is wrong.
//
// Children is a pointer so that a missing list can be told from an empty
// one (see CompositeSyncResponse.ChildrenAbsent).
type compositeSyncResponseJSON struct {
	Status             any     `json:"status"`
	Children           *[]any  `json:"children"`
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	Finalized          bool    `json:"finalized"`
	Events             *[]any  `json:"events"`
}

// compositeSyncResponseKeys are the top-level keys of a composite answer,
// for suggestions.
var compositeSyncResponseKeys = []string{"status", "children", "resyncAfterSeconds", "finalized", "events"}

// DecodeHookResponse implements Response.
func (r *CompositeSyncResponse) DecodeHookResponse(body []byte, mode v1alpha1.ResponseUnMarshallMode) error {
	*r = CompositeSyncResponse{}
	if err := checkListLength(body, "children", v1alpha1.MaxAnswerObjects); err != nil {
		return err
	}
	var w compositeSyncResponseJSON
	unknown, err := unmarshal(body, &w, mode, compositeSyncResponseKeys)
	if err != nil {
		return err
	}
	status, err := statusObject(w.Status)
	if err != nil {
		return err
	}
	if status == nil {
		status = map[string]any{}
	}
	children, err := objectList("children", w.Children)
	if err != nil {
		return err
	}
	events, err := CheckEvents(w.Events)
	if err != nil {
		return err
	}
	*r = CompositeSyncResponse{
		Status:             status,
		Children:           children,
		ResyncAfterSeconds: w.ResyncAfterSeconds,
		Finalized:          w.Finalized,
		Events:             events,
		ChildrenAbsent:     w.Children == nil && !hasKey(body, "children"),
		UnknownFields:      unknown,
	}
	return nil
}

// decoratorSyncResponseJSON is the wire form of DecoratorSyncResponse.
type decoratorSyncResponseJSON struct {
	Labels             map[string]*string `json:"labels"`
	Annotations        map[string]*string `json:"annotations"`
	Status             any                `json:"status"`
	Attachments        *[]any             `json:"attachments"`
	ResyncAfterSeconds float64            `json:"resyncAfterSeconds"`
	Finalized          bool               `json:"finalized"`
	Events             *[]any             `json:"events"`
}

// decoratorSyncResponseKeys are the top-level keys of a decorator answer,
// for suggestions.
var decoratorSyncResponseKeys = []string{"labels", "annotations", "status", "attachments", "resyncAfterSeconds", "finalized", "events"}

// DecodeHookResponse implements Response.
func (r *DecoratorSyncResponse) DecodeHookResponse(body []byte, mode v1alpha1.ResponseUnMarshallMode) error {
	*r = DecoratorSyncResponse{}
	if err := checkListLength(body, "attachments", v1alpha1.MaxAnswerObjects); err != nil {
		return err
	}
	var w decoratorSyncResponseJSON
	unknown, err := unmarshal(body, &w, mode, decoratorSyncResponseKeys)
	if err != nil {
		return err
	}
	status, err := statusObject(w.Status)
	if err != nil {
		return err
	}
	attachments, err := objectList("attachments", w.Attachments)
	if err != nil {
		return err
	}
	events, err := CheckEvents(w.Events)
	if err != nil {
		return err
	}
	*r = DecoratorSyncResponse{
		Labels:             w.Labels,
		Annotations:        w.Annotations,
		Status:             status,
		Attachments:        attachments,
		ResyncAfterSeconds: w.ResyncAfterSeconds,
		Finalized:          w.Finalized,
		Events:             events,
		AttachmentsAbsent:  w.Attachments == nil && !hasKey(body, "attachments"),
		UnknownFields:      unknown,
	}
	return nil
}

// customizeResponseJSON is the wire form of CustomizeResponse.
type customizeResponseJSON struct {
	RelatedResources []v1alpha1.RelatedResourceRule `json:"relatedResources"`
}

// DecodeHookResponse implements Response.
func (r *CustomizeResponse) DecodeHookResponse(body []byte, mode v1alpha1.ResponseUnMarshallMode) error {
	*r = CustomizeResponse{}
	var w customizeResponseJSON
	if _, err := unmarshal(body, &w, mode, nil); err != nil {
		return err
	}
	var errs field.ErrorList
	for i := range w.RelatedResources {
		errs = append(errs, v1alpha1.ValidateRelatedResourceRule(&w.RelatedResources[i], field.NewPath("relatedResources").Index(i))...)
	}
	if err := errs.ToAggregate(); err != nil {
		return err
	}
	r.RelatedResources = w.RelatedResources
	return nil
}

// unmarshal decodes body into the wire struct v. Both modes match JSON keys
// case-sensitively and keep integers as int64, as Kubernetes expects of
// unstructured objects. Strict mode also rejects unknown and duplicate
// fields of typed structs: the response envelope and, in a customize
// response, the rules; the content of objects is never checked for them.
// Loose mode ignores them, but returns the unknown top-level keys when
// known lists the envelope's keys (nil: none are returned), each with
// the known key it most likely misspells.
func unmarshal(body []byte, v any, mode v1alpha1.ResponseUnMarshallMode, known []string) ([]UnknownField, error) {
	// A literal null would decode as the zero response, which for a sync
	// hook means "no children": refuse anything but an object.
	switch trimmed := bytes.TrimLeft(body, " \t\r\n"); {
	case len(trimmed) == 0:
		return nil, errors.New("empty body, want a JSON object")
	case trimmed[0] != '{':
		kind := jsonTokenKind(trimmed[0])
		if kind == "not JSON" {
			kind += " (it starts " + bodyStart(trimmed) + ")"
		}
		return nil, fmt.Errorf("body is %s, want a JSON object", kind)
	}
	var (
		err     error
		unknown []UnknownField
	)
	switch {
	case mode == v1alpha1.ResponseUnMarshallModeStrict:
		var strictErrs []error
		strictErrs, err = kjson.UnmarshalStrict(body, v)
		if err == nil && len(strictErrs) > 0 {
			return nil, strictError(strictErrs)
		}
	case known != nil:
		// The same decoding as UnmarshalCaseSensitivePreserveInts, which
		// also lists the unknown fields. The sync envelopes hold untyped
		// values only, so every unknown field is a top-level key.
		var strictErrs []error
		strictErrs, err = kjson.UnmarshalStrict(body, v, kjson.DisallowUnknownFields)
		for _, se := range strictErrs {
			var fe kjson.FieldError
			if errors.As(se, &fe) {
				unknown = append(unknown, UnknownField{Key: fe.FieldPath(), Suggestion: Suggest(fe.FieldPath(), known)})
			}
		}
	default:
		err = kjson.UnmarshalCaseSensitivePreserveInts(body, v)
	}
	if err != nil {
		if ok, offset := kjson.SyntaxErrorOffset(err); ok {
			return nil, fmt.Errorf("invalid JSON at offset %d (the body starts %s): %w", offset, bodyStart(body), err)
		}
		return nil, err
	}
	return unknown, nil
}

// hasKey reports whether the JSON object in body, already decoded without
// error, has the top-level key (matched case-sensitively), whatever its
// value, null included. It decodes body again: call it only when the key's
// field decoded as nil, to tell a null from a missing key.
func hasKey(body []byte, key string) bool {
	var top map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &top); err != nil {
		return false
	}
	_, ok := top[key]
	return ok
}

// statusObject checks that a decoded status is null or an object.
func statusObject(v any) (map[string]any, error) {
	switch s := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return s, nil
	default:
		return nil, fmt.Errorf("status is %s, want a JSON object or null", jsonValueKind(v))
	}
}

// objectList turns the decoded list field into objects, checking that each
// is an object with an apiVersion, a kind and a metadata.name. A null or
// missing list (nil) gives no objects.
func objectList(field string, list *[]any) ([]*unstructured.Unstructured, error) {
	if list == nil || len(*list) == 0 {
		return nil, nil
	}
	items := *list
	out := make([]*unstructured.Unstructured, len(items))
	objs := make([]unstructured.Unstructured, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is %s, want a JSON object", field, i, jsonValueKind(item))
		}
		if err := checkObject(m); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		objs[i].Object = m
		out[i] = &objs[i]
	}
	return out, nil
}

// checkObject checks the fields every object a hook returns must have.
func checkObject(obj map[string]any) error {
	apiVersion, err := requiredString(obj, "apiVersion", "apiVersion")
	if err != nil {
		return err
	}
	if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
		return fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	if _, err := requiredString(obj, "kind", "kind"); err != nil {
		return err
	}
	metaValue, ok := obj["metadata"]
	if !ok || metaValue == nil {
		return errors.New("metadata.name is required")
	}
	meta, ok := metaValue.(map[string]any)
	if !ok {
		return fmt.Errorf("metadata is %s, want a JSON object", jsonValueKind(metaValue))
	}
	if _, err := requiredString(meta, "name", "metadata.name"); err != nil {
		return err
	}
	if ns, ok := meta["namespace"]; ok && ns != nil {
		if _, ok := ns.(string); !ok {
			return fmt.Errorf("metadata.namespace is %s, want a string", jsonValueKind(ns))
		}
	}
	return nil
}

func requiredString(m map[string]any, key, path string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", fmt.Errorf("%s is required", path)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is %s, want a string", path, jsonValueKind(v))
	}
	if s == "" {
		return "", fmt.Errorf("%s is required", path)
	}
	return s, nil
}

// jsonValueKind names the JSON type of a decoded value.
func jsonValueKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case int64, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// jsonTokenKind names the JSON type that starts with c.
// bodyStartBytes is how much of an answer's start bodyStart quotes.
const bodyStartBytes = 48

// scrubWords end bodyStart's quote before them (matched in any case):
// what may start a Secret's data or a credential.
var scrubWords = []string{"data", "token", "password", "secret", "key", "auth", "@"}

// bodyStart quotes the start of an answer that is not JSON, or not valid
// JSON, so that its error shows what the hook sent (an HTML error page, a
// stack trace, a JavaScript object literal): at most bodyStartBytes bytes,
// leading blanks skipped, cut before the first of scrubWords (it may go
// on with a Secret's data or a credential, which no error, log or Event
// may hold), with "..." when cut, as a Go-quoted string (control
// characters escaped).
func bodyStart(body []byte) string {
	s := string(bytes.TrimLeft(body, " \t\r\n"))
	cut := len(s) > bodyStartBytes
	if cut {
		s = s[:bodyStartBytes]
	}
	lower := []byte(s) // ASCII lower case: the same byte offsets
	for i, c := range lower {
		if 'A' <= c && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	for _, w := range scrubWords {
		if i := bytes.Index(lower, []byte(w)); i >= 0 {
			s, lower, cut = s[:i], lower[:i], true
		}
	}
	s = strings.ToValidUTF8(s, "")
	if cut {
		return strconv.Quote(s) + "..."
	}
	return strconv.Quote(s)
}

func jsonTokenKind(c byte) string {
	switch {
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '"':
		return "a string"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	case c == '[':
		return "an array"
	default:
		return "not JSON"
	}
}

// checkListLength refuses an answer whose top-level array under key (any
// occurrence of it) has more than maxItems elements. It scans body without
// decoding it (internal/jsonscan), and stops counting at the first element
// too many: an answer of many small objects is refused before any is
// decoded. It leaves malformed JSON to the decoder (returning nil), and
// skips bodies too short to hold that many elements.
func checkListLength(body []byte, key string, maxItems int) error {
	// The shortest elements are one byte and a comma.
	if len(body) <= 2*maxItems {
		return nil
	}
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil
	}
	i = jsonscan.SkipSpace(body, i+1)
	for i < len(body) && body[i] == '"' {
		keyEnd, err := jsonscan.SkipValue(body, i)
		if err != nil {
			return nil
		}
		name := body[i+1 : keyEnd-1]
		i = jsonscan.SkipSpace(body, keyEnd)
		if i >= len(body) || body[i] != ':' {
			return nil
		}
		i = jsonscan.SkipSpace(body, i+1)
		end := -1
		if i < len(body) && body[i] == '[' && jsonKeyIs(name, key) {
			if end, err = checkArrayLength(body, i, key, maxItems); err != nil {
				return err
			}
		} else if skipped, err := jsonscan.SkipValue(body, i); err == nil {
			end = skipped
		}
		if end < 0 {
			return nil
		}
		i = jsonscan.SkipSpace(body, end)
		if i >= len(body) || body[i] != ',' { // '}', or malformed
			return nil
		}
		i = jsonscan.SkipSpace(body, i+1)
	}
	return nil
}

// checkArrayLength counts the elements of the array that starts at
// body[i], key's, and returns where it ends; an error when it has more than
// maxItems elements, and -1 when it is malformed.
func checkArrayLength(body []byte, i int, key string, maxItems int) (int, error) {
	i = jsonscan.SkipSpace(body, i+1)
	if i < len(body) && body[i] == ']' {
		return i + 1, nil
	}
	for n := 1; ; n++ {
		if n > maxItems {
			return 0, fmt.Errorf("the hook asked for more than the limit of %d %s in one answer", maxItems, key)
		}
		end, err := jsonscan.SkipValue(body, i)
		if err != nil {
			return -1, nil
		}
		i = jsonscan.SkipSpace(body, end)
		switch {
		case i < len(body) && body[i] == ']':
			return i + 1, nil
		case i < len(body) && body[i] == ',':
			i = jsonscan.SkipSpace(body, i+1)
		default:
			return -1, nil
		}
	}
}

// jsonKeyIs reports whether the raw (still escaped) JSON key name is key.
func jsonKeyIs(name []byte, key string) bool {
	if bytes.IndexByte(name, '\\') < 0 {
		return string(name) == key
	}
	var unescaped string
	quoted := make([]byte, 0, len(name)+2)
	quoted = append(append(append(quoted, '"'), name...), '"')
	return json.Unmarshal(quoted, &unescaped) == nil && unescaped == key
}
