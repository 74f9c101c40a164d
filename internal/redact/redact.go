// Package redact removes the data of Secrets, and the credentials of URLs,
// from what metactl logs.
//
// Objects of kind Secret in the core group ("apiVersion": "v1") keep their
// keys but lose their values under data and stringData, and their
// last-applied-configuration annotations, wherever they sit in a document:
// a hook request's children, related objects, the parent itself, the
// controller object, or a hook response. Every string of such a document
// that is a URL with credentials (user information, or a query, which may
// carry a token) is written as URL writes it: a webhook's url in the
// controller object, say. Nothing else is changed.
package redact

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// IsSecret reports whether obj (a decoded JSON object) is a core Secret:
// apiVersion "v1" and kind "Secret". It is metactl's one test of what is a
// Secret, wherever its data is kept out (logs here, digests in
// pkg/dynamic/secretdigest's users, scrubbed hook errors).
func IsSecret(obj map[string]any) bool {
	return obj["apiVersion"] == "v1" && obj["kind"] == "Secret"
}

// Redacted replaces each value of a Secret's data, as it replaces the
// credentials of a URL (v1alpha1.Redacted).
const Redacted = v1alpha1.Redacted

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
		secret := IsSecret(t)
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
	case string:
		if strings.Contains(t, "://") {
			return URLs(t)
		}
		return t
	default:
		return v
	}
}

// URLs returns text with each URL in it written as URL writes it: a
// webhook's url, or one within a JSON document held in a string (the
// last-applied-configuration annotation). A URL in text is a scheme (a
// letter, then letters, digits, "+", "-" or "."), "://", and what follows
// up to a space, a quote, a backslash (JSON escapes) or an angle bracket.
// It scans text once and allocates only for its result (the regular
// expression it replaces allocated some 500 KiB to scan 8 KiB of
// letters).
func URLs(text string) string {
	var b strings.Builder
	done := 0 // text[:done] is written, or scanned and unchanged
	from := 0 // where the next "://" is looked for
	for {
		i := strings.Index(text[from:], "://")
		if i < 0 {
			break
		}
		sep := from + i
		start := sep
		for start > done && isSchemeByte(text[start-1]) {
			start--
		}
		for start < sep && !isLetter(text[start]) {
			start++
		}
		end := sep + len("://")
		for end < len(text) && !isURLEnd(text[end]) {
			end++
		}
		if start == sep || end == sep+len("://") {
			from = sep + 1 // no scheme, or nothing after "://"
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(text))
		}
		b.WriteString(text[done:start])
		b.WriteString(URL(text[start:end]))
		done, from = end, end
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isSchemeByte(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// isURLEnd reports whether c ends a URL within text: a space (as \s of
// regular expressions), a quote, a backslash or an angle bracket.
func isURLEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\f', '\r', '"', '\'', '<', '>', '\\':
		return true
	}
	return false
}

// URL returns s, a URL, without what may be credentials: its user
// information is replaced by Redacted, and the value of each query
// parameter too (the names stay). A string that does not parse as a URL is
// returned whole only when it has neither '@' nor '?'. The rule is the
// API's (v1alpha1.RedactURL), whose validation errors show webhook URLs so.
func URL(s string) string { return v1alpha1.RedactURL(s) }

// ParseURL parses s, a URL as URL returns it. Its redacted user
// information ("//<redacted>@"), which url.Parse refuses, is parsed as the
// user named Redacted (no password); any other s is parsed by url.Parse.
func ParseURL(s string) (*url.URL, error) {
	before, after, found := strings.Cut(s, "//"+Redacted+"@")
	if !found || strings.ContainsAny(before, "/?#") {
		return url.Parse(s)
	}
	u, err := url.Parse(before + "//" + after)
	if err != nil {
		return nil, err
	}
	u.User = url.User(Redacted)
	return u, nil
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
