/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/hooks"
)

// maxErrorBodyRead is how much of a failed answer's body is read, and
// scrubbed whole, before its start is kept: a Secret's value of up to
// maxErrorBodyRead-MaxStatusErrorBody bytes that the cut at
// MaxStatusErrorBody would split is still found whole. It is small, as
// every worker may be reading one at once, outside the response budget.
const maxErrorBodyRead = 8 << 10

// minScrubbed is the shortest value scrubbed from an error body wherever
// it appears. A shorter one (1 to minScrubbed-1 bytes) is scrubbed only
// where it stands alone (see replaceAlone): anywhere, it would cut
// ordinary words out of every message. A query value of the hook's URL
// (which may be a token, or a version) is scrubbed only from minScrubbed
// bytes.
const minScrubbed = 4

// readErrorBody returns the start of a failed answer's body, at most
// MaxStatusErrorBody bytes, for its StatusError, which reaches the log, a
// SyncError Event and the controller's Synced condition. It is scrubbed of
// the secrets the request carried, which a hook that echoes its request
// would otherwise put there: a body that is JSON has every Secret object's
// data redacted (redact.JSON); then every value of the data and stringData
// of a Secret in request (children, related objects, the parent), as
// written and base64-decoded, and the credentials of req's Authorization
// header and of its URL (see scrubber.addURL), are replaced wherever they
// appear by redact.Redacted; a body that is not JSON has every URL in it
// written as redact.URL writes it. Before the secrets are looked for,
// every JSON escape \uXXXX of a character that needs none (a letter, a
// digit, "<") is written as that character (unescapeUnicode), so that a
// secret a hook spells with such escapes is found too. Values shorter than
// minScrubbed bytes are replaced only where they stand alone
// (replaceAlone); query values of the URL are left below minScrubbed.
//
// At most maxErrorBodyRead bytes are read; a secret cut by that is not
// shown in part (see scrub); the secrets are taken from the
// objects of request (a *CompositeSyncRequest, *DecoratorSyncRequest or
// *CustomizeRequest) in place, not from its encoding.
func readErrorBody(body io.Reader, request any, req *http.Request) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBodyRead+1))
	_, _ = io.CopyN(io.Discard, body, 64<<10) // so that the connection can be reused
	if len(b) == 0 {
		return ""
	}
	truncated := len(b) > maxErrorBodyRead
	if truncated {
		b = b[:maxErrorBodyRead]
		// Without a character the cut split, so that the start of a
		// secret the cut split is found (see scrubber.cutAt).
		for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	var text string
	if !truncated && json.Valid(b) {
		text = redact.JSON(b)
	} else {
		// Every URL in it without its credentials (user information,
		// query values), as redact.JSON does within a JSON body.
		text = redact.URLs(strings.ToValidUTF8(string(b), "\uFFFD"))
	}
	text = scrub(unescapeUnicode(text), truncated, request, req)
	if len(text) > MaxStatusErrorBody {
		cut := MaxStatusErrorBody
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return strings.TrimSpace(text)
}

// scrub returns text with every secret of request and req (see
// readErrorBody) that appears in it replaced by redact.Redacted, in one
// pass, the longest one first where several start at the same place.
//
// When text was cut (truncated), a secret whose start ends it, at least
// minScrubbed bytes of it, is cut off too, and redact.Redacted ends text
// instead: a value longer than what is read is never shown in part.
func scrub(text string, truncated bool, request any, req *http.Request) string {
	s := scrubber{text: text, truncated: truncated, cutAt: len(text)}
	for i := 0; i+minScrubbed <= len(text); i++ {
		s.windows.add(text[i : i+minScrubbed])
	}
	requestSecrets(request, func(field, value string) {
		if field == "data" {
			s.addEncoded(value)
		} else {
			s.add(value)
		}
	})
	if req != nil {
		if scheme, credentials, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok {
			credentials = strings.TrimSpace(credentials)
			s.addEncoded(credentials)
			if strings.EqualFold(scheme, "Basic") {
				if decoded, err := base64.StdEncoding.DecodeString(credentials); err == nil {
					if _, password, ok := strings.Cut(string(decoded), ":"); ok {
						s.add(password)
					}
				}
			}
		}
		if u := req.URL; u != nil {
			s.addURL(u, req.Header.Get("Authorization") == "")
		}
	}
	if s.cutAt < len(text) {
		text = text[:s.cutAt]
	}
	if len(s.found) > 0 {
		slices.SortFunc(s.found, func(a, b string) int { return len(b) - len(a) })
		found := slices.Compact(s.found)
		pairs := make([]string, 0, 2*len(found))
		for _, f := range found {
			pairs = append(pairs, f, redact.Redacted)
		}
		text = strings.NewReplacer(pairs...).Replace(text)
	}
	if len(s.short) > 0 {
		text = replaceAlone(text, s.short, truncated && s.cutAt == len(s.text))
	}
	if s.cutAt < len(s.text) {
		text += redact.Redacted
	}
	return text
}

// isWordByte reports whether c belongs to a word around a short secret:
// an ASCII letter, digit or '_', or a byte of a multi-byte character.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c >= utf8.RuneSelf
}

// replaceAlone returns text with each of short, values of fewer than
// minScrubbed bytes, replaced by redact.Redacted where it stands alone: no
// word byte (isWordByte) right before or after it (a value "ab" in "(ab)"
// or "key=ab", not in "table"). When text was cut (truncated), a start of
// one of them that ends text alone is replaced too.
func replaceAlone(text string, short map[string]bool, truncated bool) string {
	var b strings.Builder
	done := 0
	for i := 0; i < len(text); {
		if i > 0 && isWordByte(text[i-1]) {
			i++
			continue
		}
		match := 0
		for n := minScrubbed - 1; n > 0 && match == 0; n-- {
			end := i + n
			if end <= len(text) && short[text[i:end]] && (end == len(text) || !isWordByte(text[end])) {
				match = n
			}
		}
		if match == 0 && truncated && len(text)-i < minScrubbed-1 {
			// The start of a short secret the cut ends text with.
			for v := range short {
				if len(v) > len(text)-i && strings.HasPrefix(v, text[i:]) {
					match = len(text) - i
					break
				}
			}
		}
		if match == 0 {
			i++
			continue
		}
		b.WriteString(text[done:i])
		b.WriteString(redact.Redacted)
		i += match
		done = i
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

// unescapeUnicode returns text with every JSON escape \uXXXX (a UTF-16
// surrogate pair: two) of a character that JSON may write as it is (not a
// control character, '"' or '\\') replaced by that character, in UTF-8,
// with the whole run of backslashes before the u (a JSON document held in
// a JSON string escapes the escape: \\u0068). Other escapes, and a
// malformed one, are kept. It allocates only when it replaces.
func unescapeUnicode(text string) string {
	if !strings.Contains(text, `\u`) {
		return text
	}
	var b strings.Builder
	done := 0
	for i := 0; i < len(text); {
		r, n := unicodeEscape(text[i:])
		if n == 0 {
			i++
			continue
		}
		if utf16.IsSurrogate(r) {
			r2, n2 := unicodeEscape(text[i+n:])
			r = utf16.DecodeRune(r, r2)
			if n2 == 0 || r == utf8.RuneError {
				i += n
				continue
			}
			n += n2
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '"' || r == '\\' {
			i += n
			continue
		}
		b.WriteString(text[done:i])
		b.WriteRune(r)
		i += n
		done = i
	}
	if done == 0 {
		return text
	}
	b.WriteString(text[done:])
	return b.String()
}

// unicodeEscape reads, at the start of s, a run of backslashes, "u" and
// four hexadecimal digits, and returns the code unit and its length; 0
// for none.
func unicodeEscape(s string) (rune, int) {
	k := 0
	for k < len(s) && s[k] == '\\' {
		k++
	}
	if k == 0 || k+5 > len(s) || s[k] != 'u' {
		return 0, 0
	}
	r, ok := hex4(s[k+1 : k+5])
	if !ok {
		return 0, 0
	}
	return r, k + 5
}

// hex4 parses four hexadecimal digits.
func hex4(s string) (rune, bool) {
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// addURL looks for the credentials of u: its user name and password, and
// each value of its query (a token, often), as written and unescaped.
// When basic is true (the request has no Authorization header of its
// own), Go's HTTP client sends u's user information as basic
// authentication, "user:password" in base64, which is looked for too.
func (s *scrubber) addURL(u *url.URL, basic bool) {
	if u.User != nil {
		user := u.User.Username()
		password, _ := u.User.Password()
		s.add(user)
		s.add(password)
		if basic {
			s.add(user + ":" + password)
			s.add(base64.StdEncoding.EncodeToString([]byte(user + ":" + password)))
		}
	}
	for param := range strings.SplitSeq(u.RawQuery, "&") {
		_, value, _ := strings.Cut(param, "=")
		if len(value) >= minScrubbed {
			s.add(value)
		}
		if unescaped, err := url.QueryUnescape(value); err == nil && unescaped != value && len(unescaped) >= minScrubbed {
			s.add(unescaped)
		}
	}
}

// scrubber collects the secrets found in text. A secret can appear only
// where its first minScrubbed bytes do: windows, the hashes of every such
// window of text (at most maxErrorBodyRead of them), rules most secrets
// out without a search or a copy, however many the request carried.
type scrubber struct {
	text    string
	windows gramSet
	found   []string
	// short are the secrets shorter than minScrubbed bytes, looked for
	// only where they stand alone (replaceAlone).
	short   map[string]bool
	encoded []byte
	decoded []byte
	// truncated says text is the start of a longer body; cutAt is then
	// where the first secret whose start ends text begins (len(text) when
	// none does).
	truncated bool
	cutAt     int
}

// mayHold reports whether text may hold v: whether up to 33 of its
// windows of minScrubbed bytes, spread over it, first and last included,
// are all among those of text.
func mayHold[S string | []byte](windows *gramSet, v S) bool {
	if len(v) < minScrubbed {
		return false
	}
	last := len(v) - minScrubbed
	step := max(1, last/32)
	for i := 0; ; i += step {
		i = min(i, last)
		if !windows.hasHash(gramHash(v[i : i+minScrubbed])) {
			return false
		}
		if i == last {
			return true
		}
	}
}

// add looks for v as written and as it is written within a JSON string,
// with the HTML characters <, > and & escaped (as encoding/json writes by
// default) and not (as redact.JSON writes).
func (s *scrubber) add(v string) {
	s.find(v)
	if !needsJSONEscape(v) {
		return
	}
	var out strings.Builder
	enc := json.NewEncoder(&out)
	for _, escapeHTML := range []bool{true, false} {
		out.Reset()
		enc.SetEscapeHTML(escapeHTML)
		if enc.Encode(v) == nil {
			q := strings.TrimSuffix(out.String(), "\n")
			if q = q[1 : len(q)-1]; q != v {
				s.find(q)
			}
		}
	}
}

// find adds v to the secrets found when text holds it; when text was cut,
// it also notes where v starts if its start, at least minScrubbed bytes,
// ends text.
func (s *scrubber) find(v string) {
	if len(v) < minScrubbed {
		if v != "" {
			if s.short == nil {
				s.short = map[string]bool{}
			}
			s.short[v] = true
		}
		return
	}
	if mayHold(&s.windows, v) && strings.Contains(s.text, v) {
		s.found = append(s.found, v)
		return
	}
	if !s.truncated || len(v) <= minScrubbed || !s.windows.has(v[:minScrubbed]) {
		return
	}
	// The start of v ends text only if it begins in its last len(v)-1
	// bytes, with v's first minScrubbed bytes.
	from := max(0, len(s.text)-len(v)+1)
	for from <= len(s.text)-minScrubbed && from < s.cutAt {
		i := strings.Index(s.text[from:], v[:minScrubbed])
		if i < 0 {
			return
		}
		if p := from + i; strings.HasPrefix(v, s.text[p:]) {
			s.cutAt = min(s.cutAt, p)
			return
		}
		from += i + 1
	}
}

// addEncoded looks for v, and for v base64-decoded (see add).
func (s *scrubber) addEncoded(v string) {
	s.add(v)
	// Decoded in buffers used again for every value: most are not in text.
	s.encoded = append(s.encoded[:0], v...)
	s.decoded = slices.Grow(s.decoded[:0], base64.StdEncoding.DecodedLen(len(v)))
	n, err := base64.StdEncoding.Decode(s.decoded[:cap(s.decoded)], s.encoded)
	decoded := s.decoded[:n]
	if err == nil && utf8.Valid(decoded) && (len(decoded) < minScrubbed || mayHold(&s.windows, decoded) || needsJSONEscape(decoded)) {
		s.add(string(decoded))
	}
}

// needsJSONEscape reports whether encoding/json writes s otherwise than as
// it is within a JSON string.
func needsJSONEscape[S string | []byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// gramSet is a set of hashed minScrubbed-byte strings, with false
// positives: 64 Ki bits.
type gramSet [1 << 10]uint64

func gramHash[S string | []byte](s S) uint32 {
	h := uint32(2166136261) // FNV-1a
	for i := range minScrubbed {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h & (1<<16 - 1)
}

func (g *gramSet) add(s string) { h := gramHash(s); g[h>>6] |= 1 << (h & 63) }

func (g *gramSet) has(s string) bool { return g.hasHash(gramHash(s)) }

func (g *gramSet) hasHash(h uint32) bool { return g[h>>6]&(1<<(h&63)) != 0 }

// requestSecrets calls f with each string value of the data and
// stringData of every core Secret object in the objects of request, a
// hook request of pkg/hooks (other values carry none that metactl
// knows of), as they are: nothing is encoded or copied.
func requestSecrets(request any, f func(field, value string)) {
	object := func(u *unstructured.Unstructured) {
		if u != nil {
			walkSecrets(u.Object, f)
		}
	}
	objects := func(m hooks.ObjectMap) {
		for _, inner := range m {
			for _, u := range inner {
				object(u)
			}
		}
	}
	switch r := request.(type) {
	case *hooks.CompositeSyncRequest:
		object(r.Controller)
		object(r.Parent)
		objects(r.Children)
		objects(r.Related)
	case *hooks.DecoratorSyncRequest:
		object(r.Controller)
		object(r.Object)
		objects(r.Attachments)
		objects(r.Related)
	case *hooks.CustomizeRequest:
		object(r.Controller)
		object(r.Parent)
	case *unstructured.Unstructured:
		object(r)
	case map[string]any, []any:
		walkSecrets(r, f)
	}
}

// walkSecrets calls f with each string value of the data and stringData
// of every core Secret object in v, decoded JSON.
func walkSecrets(v any, f func(field, value string)) {
	switch t := v.(type) {
	case map[string]any:
		if redact.IsSecret(t) {
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

// scrubbedError is err with the text of its message scrubbed (see scrub);
// errors.As still finds err's own types.
type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }
