/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/metactl/metactl/internal/redact"
)

// maxErrorBodyRead is how much of a failed answer's body is read, and
// scrubbed whole, before its start is kept: a Secret's value that the cut
// at MaxStatusErrorBody would split is still found.
const maxErrorBodyRead = 64 << 10

// minScrubbed is the shortest value scrubbed from an error body: shorter
// ones would cut ordinary words out of every message.
const minScrubbed = 4

// readErrorBody returns the start of a failed answer's body, at most
// MaxStatusErrorBody bytes, for its StatusError, which reaches the log, a
// SyncError Event and the controller's Synced condition. It is scrubbed of
// the secrets the request carried, which a hook that echoes its request
// would otherwise put there: a body that is JSON has every Secret object's
// data redacted (redact.JSON); then every value of the data and stringData
// of a Secret in request (children, related objects, the parent), as
// written and base64-decoded, and the credentials of req's Authorization
// header and of its URL, are replaced wherever they appear by
// redact.Redacted. Values shorter than minScrubbed characters are left.
func readErrorBody(body io.Reader, request []byte, req *http.Request) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBodyRead))
	_, _ = io.CopyN(io.Discard, body, 64<<10) // so that the connection can be reused
	text := strings.ToValidUTF8(string(b), "\uFFFD")
	if json.Valid(b) {
		text = redact.JSON(b)
	}
	for _, secret := range secretsOf(request, req) {
		text = strings.ReplaceAll(text, secret, redact.Redacted)
	}
	if len(text) > MaxStatusErrorBody {
		cut := MaxStatusErrorBody
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return strings.TrimSpace(text)
}

// secretsOf returns the secrets a hook request carried, longest first, in
// every form an echo may show them (see readErrorBody).
func secretsOf(request []byte, req *http.Request) []string {
	var out []string
	add := func(s string) {
		if len(s) < minScrubbed {
			return
		}
		out = append(out, s)
		if quoted, err := json.Marshal(s); err == nil {
			if q := string(quoted[1 : len(quoted)-1]); q != s {
				out = append(out, q)
			}
		}
	}
	addEncoded := func(s string) {
		add(s)
		if decoded, err := base64.StdEncoding.DecodeString(s); err == nil && utf8.Valid(decoded) {
			add(string(decoded))
		}
	}
	var doc any
	if json.Unmarshal(request, &doc) == nil {
		walkSecrets(doc, func(field, value string) {
			if field == "data" {
				addEncoded(value)
			} else {
				add(value)
			}
		})
	}
	if req != nil {
		if scheme, credentials, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok {
			addEncoded(strings.TrimSpace(credentials))
			if strings.EqualFold(scheme, "Basic") {
				if decoded, err := base64.StdEncoding.DecodeString(strings.TrimSpace(credentials)); err == nil {
					if _, password, ok := strings.Cut(string(decoded), ":"); ok {
						add(password)
					}
				}
			}
		}
		if u := req.URL; u != nil && u.User != nil {
			if password, ok := u.User.Password(); ok {
				add(password)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// walkSecrets calls f with each string value of the data and stringData
// of every core Secret object in v, decoded JSON.
func walkSecrets(v any, f func(field, value string)) {
	switch t := v.(type) {
	case map[string]any:
		if t["kind"] == "Secret" && t["apiVersion"] == "v1" {
			for _, field := range []string{"data", "stringData"} {
				if values, ok := t[field].(map[string]any); ok {
					for _, value := range values {
						if s, ok := value.(string); ok {
							f(field, s)
						}
					}
				}
			}
		}
		for _, value := range t {
			walkSecrets(value, f)
		}
	case []any:
		for _, value := range t {
			walkSecrets(value, f)
		}
	}
}
