package v1alpha1

import (
	"net/url"
	"strings"
)

// Redacted stands for what RedactURL cuts out of a URL.
const Redacted = "<redacted>"

// RedactURL returns s, a URL, without what may be credentials: its user
// information is replaced by Redacted, and the value of each query
// parameter too (the names stay). A string that does not parse as a URL is
// returned whole only when it has neither '@' nor '?'. Validation errors
// show webhook URLs so; metactl shows every URL of its logs and records
// so (internal/redact).
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.ContainsAny(s, "@?") {
			return "<invalid URL, not shown: it may hold credentials>"
		}
		return s
	}
	if u.User == nil && u.RawQuery == "" {
		return s
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme + ":")
	}
	if u.Host != "" || u.User != nil {
		b.WriteString("//")
	}
	if u.User != nil {
		b.WriteString(Redacted + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" {
		b.WriteString("?")
		for i, param := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteString("&")
			}
			name, _, hasValue := strings.Cut(param, "=")
			b.WriteString(name)
			if hasValue {
				b.WriteString("=" + Redacted)
			}
		}
	}
	if u.Fragment != "" {
		b.WriteString("#" + u.EscapedFragment())
	}
	return b.String()
}
