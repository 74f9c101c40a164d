// Package redact removes the data of Secrets from what metactl logs.
//
// Objects of kind Secret in the core group ("apiVersion": "v1") keep their
// keys but lose their values under data and stringData, and their
// last-applied-configuration annotations, wherever they sit in a document:
// a hook request's children, related objects, the parent itself, or a hook
// response. Nothing else is changed.
package redact

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Redacted replaces each value of a Secret's data.
const Redacted = "<redacted>"

// JSON returns a JSON document with every Secret's data redacted. A
// document that does not parse is not returned at all, only its size: it
// may hold anything.
func JSON(data []byte) string {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Sprintf("<%d bytes of invalid JSON>", len(data))
	}
	var out strings.Builder
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Value(doc)); err != nil {
		return fmt.Sprintf("<%d bytes>", len(data))
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// Value returns v (decoded JSON: maps, slices, scalars) with every Secret's
// data redacted. v itself is not modified.
func Value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		secret := t["kind"] == "Secret" && t["apiVersion"] == "v1"
		for k, val := range t {
			switch {
			case secret && (k == "data" || k == "stringData"):
				out[k] = redactValues(val)
			case secret && k == "metadata":
				out[k] = redactLastApplied(val)
			default:
				out[k] = Value(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = Value(val)
		}
		return out
	default:
		return v
	}
}

// redactLastApplied redacts a Secret's last-applied annotations, which may
// hold its data (kubectl's does, in clear).
func redactLastApplied(metadata any) any {
	md, ok := metadata.(map[string]any)
	if !ok {
		return Value(metadata)
	}
	out := make(map[string]any, len(md))
	for k, v := range md {
		out[k] = v
	}
	if annotations, ok := md["annotations"].(map[string]any); ok {
		copied := make(map[string]any, len(annotations))
		for k, v := range annotations {
			if strings.HasSuffix(k, "/last-applied-configuration") {
				v = Redacted
			}
			copied[k] = v
		}
		out["annotations"] = copied
	}
	return out
}

func redactValues(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return Redacted
	}
	out := make(map[string]any, len(m))
	for k := range m {
		out[k] = Redacted
	}
	return out
}
