package hookrecord

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
)

// DigestSecrets returns body, a JSON document (a hook request or answer),
// with the data of every Secret in it replaced by digests, wherever the
// Secret sits (the parent, children, related objects, the answer's
// children, within a list): each value of an object's data and stringData
// when its apiVersion is "v1" and its kind "Secret", and the value of its
// annotations named */last-applied-configuration, which may hold its data
// (kubectl's does, in clear), each by secretdigest.Salted of its text (a
// data value's base64, a stringData value's text, the annotation's JSON):
// salted with this process's key, so a recording's digests cannot be
// compared with another process's or checked against a guessed value; a
// value that is already a digest (salted or not) is kept. Nothing else changes: body is
// returned as it is when it holds no such value, else encoded again
// (numbers kept as written). A body that is not JSON is an error: nothing
// of it may be kept.
func DigestSecrets(body []byte) ([]byte, error) { return rewrite(body, digestIn) }

// scrubRequest returns body, a hook request, as DigestSecrets does, and
// with every URL in its controller object (request.controller: the
// webhooks' url, an annotation holding the object as applied) without its
// credentials, as redact.URLs writes it: user information and query
// values replaced. replay reads only the path of a recorded webhook url.
func scrubRequest(body []byte) ([]byte, error) {
	return rewrite(body, func(doc any) bool {
		digested := digestIn(doc)
		redacted := false
		if m, ok := doc.(map[string]any); ok && m["controller"] != nil {
			m["controller"], redacted = redactURLsIn(m["controller"])
		}
		return digested || redacted
	})
}

// redactURLsIn returns v with each of its strings holding a URL rewritten
// by redact.URLs (maps and lists changed in place), and whether any
// changed.
func redactURLsIn(v any) (any, bool) {
	changed := false
	switch t := v.(type) {
	case string:
		if strings.Contains(t, "://") {
			if r := redact.URLs(t); r != t {
				return r, true
			}
		}
	case map[string]any:
		for k, val := range t {
			if r, ok := redactURLsIn(val); ok {
				t[k], changed = r, true
			}
		}
	case []any:
		for i, val := range t {
			if r, ok := redactURLsIn(val); ok {
				t[i], changed = r, true
			}
		}
	}
	return v, changed
}

// rewrite decodes body (numbers as json.Number), lets change rewrite it
// in place, and encodes it again when change reports a change; else
// returns body as it is.
func rewrite(body []byte, change func(doc any) bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if !change(doc) {
		return body, nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// digestIn replaces, in place, the Secret data within v, and reports
// whether it replaced any.
func digestIn(v any) bool {
	changed := false
	switch t := v.(type) {
	case map[string]any:
		if redact.IsSecret(t) {
			for _, field := range []string{"data", "stringData"} {
				switch values := t[field].(type) {
				case nil:
				case map[string]any:
					if len(values) > 0 {
						t[field] = secretdigest.SaltedValues(values)
						changed = true
					}
				default:
					// Not an object: nothing of it is kept.
					t[field] = secretdigest.Salted(string(mustJSON(values)))
					changed = true
				}
			}
			if md, ok := t["metadata"].(map[string]any); ok {
				if annotations, ok := md["annotations"].(map[string]any); ok {
					for k, a := range annotations {
						if s, ok := a.(string); ok && strings.HasSuffix(k, "/last-applied-configuration") && !secretdigest.IsDigest(s) && !secretdigest.IsSalted(s) {
							annotations[k] = secretdigest.Salted(s)
							changed = true
						}
					}
				}
			}
		}
		for _, val := range t {
			if digestIn(val) {
				changed = true
			}
		}
	case []any:
		for _, val := range t {
			if digestIn(val) {
				changed = true
			}
		}
	}
	return changed
}

// mustJSON encodes v, decoded JSON; it cannot fail.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
