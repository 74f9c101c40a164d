package redact

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestSecretsAnywhereAreRedacted(t *testing.T) {
	doc := `{"parent": {"apiVersion": "v1", "kind": "Secret", "data": {"password": "c2VjcmV0"}},
	  "children": {"Secret.v1": {"s": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"stringData\":{\"token\":\"hunter3\"}}"}}, "stringData": {"token": "hunter2"}}},
	               "ConfigMap.v1": {"c": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"visible": "yes"}}}},
	  "list": [{"apiVersion": "v1", "kind": "Secret", "data": "not-a-map"}]}`
	got := JSON([]byte(doc))
	for _, secret := range []string{"c2VjcmV0", "hunter2", "hunter3", "not-a-map"} {
		if strings.Contains(got, secret) {
			t.Errorf("output contains %q: %s", secret, got)
		}
	}
	for _, kept := range []string{`"password":"<redacted>"`, `"token":"<redacted>"`, `"visible":"yes"`, `"name":"s"`} {
		if !strings.Contains(got, kept) {
			t.Errorf("output lacks %s: %s", kept, got)
		}
	}
}

func TestInvalidJSONIsNotEchoed(t *testing.T) {
	got := JSON([]byte(`{"kind": "Secret", "data": {"x": "hunter2"`))
	if strings.Contains(got, "hunter2") {
		t.Errorf("invalid JSON echoed: %s", got)
	}
}

func TestURLCredentialsAreRedacted(t *testing.T) {
	cases := map[string]string{
		"https://user:hunter2@hooks.example.com:8443/sync?token=hunter3&v": "https://<redacted>@hooks.example.com:8443/sync?token=<redacted>&v",
		"http://hooks.example.com/sync":                                    "http://hooks.example.com/sync",
		"http://hunter2@[::1/sync":                                         "<invalid URL, not shown: it may hold credentials>",
		"plain text, no URL":                                               "plain text, no URL",
	}
	for in, want := range cases {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
	// In a document: the controller object's webhook.
	got := JSON([]byte(`{"controller": {"spec": {"hooks": {"sync": {"webhook": {"url": "https://u:hunter2@h/sync?key=hunter3"}}}}}}`))
	if strings.Contains(got, "hunter") || !strings.Contains(got, "https://<redacted>@h/sync?key=<redacted>") {
		t.Errorf("the webhook's URL is not redacted: %s", got)
	}
}

func TestURLsInTextAreRedacted(t *testing.T) {
	in := `{"kubectl.kubernetes.io/last-applied-configuration": "{\"url\":\"https://u:hunter2@h/sync?k=hunter3\"}", "plain": "see http://example.com/docs for more"}`
	got := JSON([]byte(in))
	if strings.Contains(got, "hunter") || !strings.Contains(got, `https://<redacted>@h/sync?k=<redacted>`) || !strings.Contains(got, "see http://example.com/docs for more") {
		t.Errorf("URLs in text: %s", got)
	}
}

// TestURLsMatchesThePattern: URLs finds the URLs the regular expression
// `[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>\\]+` finds (leftmost first).
func TestURLsMatchesThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>\\]+`)
	for _, in := range []string{
		"", "://", "a://", "a:// b", "1a+b://u:p@h/x?t=1 and 9://x then http://h/?k=v\"q",
		"x://y://z?k=v", "::// http://u@h", "<https://h/?a=1>", `"https://h/?a=1\"`, "ab-c.d://h?q=1\tz://w?k=2",
		"https://u:p@h/a?b=c" + strings.Repeat("x", 100) + "://h?k=v",
	} {
		if got, want := URLs(in), pattern.ReplaceAllStringFunc(in, URL); got != want {
			t.Errorf("URLs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseURLReadsARedactedURL(t *testing.T) {
	redacted := URL("https://user:pw@hooks.example:8443/sync/x?token=abc")
	if _, err := url.Parse(redacted); err == nil {
		t.Fatalf("url.Parse(%q) succeeded: the test needs a URL it refuses", redacted)
	}
	u, err := ParseURL(redacted)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", redacted, err)
	}
	if u.Scheme != "https" || u.Host != "hooks.example:8443" || u.Path != "/sync/x" || u.RawQuery != "token="+Redacted {
		t.Errorf("ParseURL(%q) = scheme %q host %q path %q query %q", redacted, u.Scheme, u.Host, u.Path, u.RawQuery)
	}
	if u.User == nil || u.User.Username() != Redacted {
		t.Errorf("ParseURL(%q): user %v, want %q", redacted, u.User, Redacted)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		t.Errorf("ParseURL(%q): has a password", redacted)
	}
	for _, s := range []string{"http://hooks.example/sync", "/sync/" + Redacted + "@x"} {
		u, err := ParseURL(s)
		if err != nil || u.User != nil {
			t.Errorf("ParseURL(%q) = %v, %v; want url.Parse's result, no user", s, u, err)
		}
	}
	if _, err := ParseURL("http://" + Redacted + "@host/%zz"); err == nil {
		t.Errorf("ParseURL of a bad path: no error")
	}
}
