package hookrecord

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
)

// DigestSecrets returns body, a JSON document (a hook request or answer),
// with the data of every Secret in it replaced by digests, wherever the
// Secret sits (the parent, children, related objects, the answer's
// children, within a list): each value of an object's data and stringData
// when its apiVersion is "v1" and its kind "Secret", and the value of its
// annotations named */last-applied-configuration, which may hold its data
// (kubectl's does, in clear), each by secretdigest.Of of its text (a data
// value's base64, a stringData value's text, the annotation's JSON); a
// value that is already a digest is kept. Nothing else changes: body is
// returned as it is when it holds no such value, else encoded again
// (numbers kept as written). A body that is not JSON is an error: nothing
// of it may be kept.
func DigestSecrets(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if !digestIn(doc) {
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
		if secretdigest.IsSecret(t) {
			for _, field := range []string{"data", "stringData"} {
				switch values := t[field].(type) {
				case nil:
				case map[string]any:
					if len(values) > 0 {
						t[field] = secretdigest.Values(values)
						changed = true
					}
				default:
					// Not an object: nothing of it is kept.
					t[field] = secretdigest.Of(string(mustJSON(values)))
					changed = true
				}
			}
			if md, ok := t["metadata"].(map[string]any); ok {
				if annotations, ok := md["annotations"].(map[string]any); ok {
					for k, a := range annotations {
						if s, ok := a.(string); ok && strings.HasSuffix(k, "/last-applied-configuration") && !secretdigest.IsDigest(s) {
							annotations[k] = secretdigest.Of(s)
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
