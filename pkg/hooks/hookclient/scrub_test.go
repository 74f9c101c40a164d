/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// TestStatusErrorHidesEchoedSecrets: a hook that fails echoing its request
// (a Secret child's data, base64 as in the request and decoded) and its
// Authorization header gets a StatusError whose body, and message, hold
// none of them, whether the echo is JSON or text, and even when a value
// straddles the cut at MaxStatusErrorBody.
func TestStatusErrorHidesEchoedSecrets(t *testing.T) {
	const value, token = "q7vXz-child-value-8f1c2d", "token-3b9e77a1"
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": "ns", "name": "s"}, "data": map[string]any{"password": encoded}}}
	request := sampleCompositeRequest("v1")
	request.Children.Insert("v1", true, secret)
	for name, echo := range map[string]func(body []byte, auth string) string{
		"json": func(body []byte, _ string) string { return string(body) },
		"text": func(body []byte, auth string) string {
			return "failed for " + auth + " with " + value + " and " + string(body)
		},
		// The cut at MaxStatusErrorBody keeps the value's first 10 bytes.
		"straddling": func(_ []byte, _ string) string {
			return strings.Repeat("x", MaxStatusErrorBody-10) + value + " " + token
		},
	} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, echo(body, r.Header.Get("Authorization")))
		})
		c := NewClient(Options{PrepareRequest: RequestPreparerFunc(func(_ *v1alpha1.Hook, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		})})
		err := c.Call(context.Background(), "things", "sync", urlHook(srv.URL+"/sync"), request, &hooks.CompositeSyncResponse{}, CallOptions{})
		var se *StatusError
		if !errors.As(err, &se) {
			t.Fatalf("%s: err = %v, want *StatusError", name, err)
		}
		for _, leaked := range []string{value, encoded, token, value[:5], encoded[:8]} {
			if strings.Contains(err.Error(), leaked) {
				t.Errorf("%s: the error shows %q: %s", name, leaked, err)
			}
		}
		if !strings.Contains(se.Body, redact.Redacted) {
			t.Errorf("%s: the body does not show %s: %q", name, redact.Redacted, se.Body)
		}
		if name == "text" && !strings.Contains(se.Body, "failed for Bearer") {
			t.Errorf("%s: the body lost its text: %q", name, se.Body)
		}
	}
}

// TestFailedAnswerMemoryIsBounded: a failed answer to a request with
// thousands of Secret children, with a large body, costs a few KiB: at
// most maxErrorBodyRead bytes of the body are held, and the Secrets are
// looked at in the request's objects, not decoded again from its encoding.
func TestFailedAnswerMemoryIsBounded(t *testing.T) {
	request := sampleCompositeRequest("v1")
	for i := range 5000 {
		value := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("secret-value-%06d-0123456789abcdef", i)))
		request.Children.Insert("v1", true, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"namespace": "ns", "name": fmt.Sprintf("s-%d", i)}, "data": map[string]any{"a": value, "b": value}}})
	}
	// The body echoes one of the values, in the part kept.
	echoed := fmt.Sprintf("secret-value-%06d-0123456789abcdef", 4321)
	body := "failed: " + echoed + " " + strings.Repeat("x", 4<<20)
	req, err := http.NewRequest(http.MethodPost, "http://hook.example:80/sync", nil)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := readErrorBody(strings.NewReader(body), request, req)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
		t.Errorf("reading the failed answer allocated %d bytes, want at most 256 KiB", alloc)
	}
	if !strings.HasPrefix(got, "failed: "+redact.Redacted+" xxx") || len(got) > MaxStatusErrorBody {
		t.Errorf("body = %.80q (%d bytes), want the echo scrubbed and at most %d bytes", got, len(got), MaxStatusErrorBody)
	}
}

// TestStatusErrorHidesURLCredentials: a hook whose URL has user
// information and a query token, and that fails echoing what it received
// (the Authorization header Go's client makes of the user information, its
// request URI, URLs with credentials), gets a StatusError that shows none
// of them, in any form.
func TestStatusErrorHidesURLCredentials(t *testing.T) {
	const user, password, token = "hook-user", "pw-5d1e9a", "query-token-77c3"
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "got "+r.Header.Get("Authorization")+" for "+r.RequestURI+
			" token "+r.URL.Query().Get("token")+" from https://"+user+":"+password+"@elsewhere/x?t="+token+
			" (see https://admin:adminpw-3@other.example/?key=k3y-value)")
	})
	u, err := url.Parse(srv.URL + "/sync?token=" + token + "&x=1")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	err = NewClient(Options{}).Call(context.Background(), "things", "sync", urlHook(u.String()), sampleCompositeRequest("v1"), &hooks.CompositeSyncResponse{}, CallOptions{})
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want *StatusError", err)
	}
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	// A URL in a text body is written as redact.URL writes it, even one
	// with credentials the request did not carry.
	for _, leaked := range []string{password, token, basic, basic[:8], user + ":" + password, "adminpw-3", "k3y-value"} {
		if strings.Contains(err.Error(), leaked) {
			t.Errorf("the error shows %q: %s", leaked, err)
		}
	}
	if !strings.Contains(se.Body, "got Basic "+redact.Redacted) {
		t.Errorf("the body lost its text: %q", se.Body)
	}
}

// TestStatusErrorHidesLongAndEscapedSecrets: a Secret value longer than
// what is read of a failed answer is not shown in part, and one with
// characters JSON escapes (", <, >, &) is found in a JSON body, which is
// shown re-encoded without HTML escaping.
func TestStatusErrorHidesLongAndEscapedSecrets(t *testing.T) {
	var long strings.Builder
	for i := 0; long.Len() < 3*maxErrorBodyRead; i++ {
		fmt.Fprintf(&long, "%x", sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
	}
	const escaped = `pa"ss<wo>rd&91f2`
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": "ns", "name": "s"}, "stringData": map[string]any{"long": long.String(), "escaped": escaped}}}
	request := sampleCompositeRequest("v1")
	request.Children.Insert("v1", true, secret)
	for name, tc := range map[string]struct {
		body   string
		leaked []string
	}{
		"longer than what is read": {"failed: " + long.String(), []string{long.String()[:16], long.String()[100:116]}},
		"starting before the cut":  {strings.Repeat("y", MaxStatusErrorBody-20) + long.String(), []string{long.String()[:16]}},
		"escaped, in JSON": {`{"error": ` + strconv.Quote(escaped) + `, "padding": "` + strings.Repeat("z", 20) + `"}`,
			[]string{escaped, `pa\"ss<wo>rd&91f2`, `rd&91f2`}},
	} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, tc.body)
		})
		err := NewClient(Options{}).Call(context.Background(), "things", "sync", urlHook(srv.URL+"/sync"), request, &hooks.CompositeSyncResponse{}, CallOptions{})
		var se *StatusError
		if !errors.As(err, &se) {
			t.Fatalf("%s: err = %v, want *StatusError", name, err)
		}
		for _, leaked := range tc.leaked {
			if strings.Contains(se.Body, leaked) {
				t.Errorf("%s: the body shows %q: %.200q", name, leaked, se.Body)
			}
		}
		if !strings.Contains(se.Body, redact.Redacted) {
			t.Errorf("%s: the body does not show %s: %.200q", name, redact.Redacted, se.Body)
		}
	}
}

// TestStatusErrorHidesShortAndUnicodeEscapedSecrets: a Secret value
// shorter than minScrubbed bytes is scrubbed where it stands alone (not
// inside a longer word), as its base64 decoding is; a value a hook spells
// with JSON \uXXXX escapes (in text, in a JSON string, escaped twice, with
// a surrogate pair) is scrubbed as if written plainly; a short query value
// of the hook's URL is left.
func TestStatusErrorHidesShortAndUnicodeEscapedSecrets(t *testing.T) {
	const long = "hunter2-s3cr3t"
	const accented = "pässwörd😀"
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"namespace": "ns", "name": "s"},
		"data":       map[string]any{"pin": base64.StdEncoding.EncodeToString([]byte("ab"))},
		"stringData": map[string]any{"two": "x7", "three": "k9Q", "long": long, "accented": accented}}}
	request := sampleCompositeRequest("v1")
	request.Children.Insert("v1", true, secret)
	for name, tc := range map[string]struct {
		body   string
		leaked []string
		kept   []string
	}{
		"short, alone": {body: "wrong password x7 for (k9Q); pin=ab.", leaked: []string{" x7 ", "(k9Q)", "=ab."},
			kept: []string{"wrong password", "for"}},
		"short, inside words": {body: "box7 k9Qz table v1", kept: []string{"box7 k9Qz table v1"}},
		"short, in JSON":      {body: `{"error":"bad token","token":"k9Q"}`, leaked: []string{`"k9Q"`}, kept: []string{"bad token"}},
		"escaped in text":     {body: `failed: \u0068\u0075nter2-s3cr3t`, leaked: []string{"nter2-s3cr3t", "hunter2"}},
		"escaped in JSON":     {body: `{"error":"token \\u0068unter2-s3cr3t"}`, leaked: []string{"nter2-s3cr3t"}},
		"escaped twice": {body: `{"error":"{\"v\":\"\\u0068unter2\\u002ds3cr3t\"}"}`,
			leaked: []string{"unter2", "s3cr3t"}},
		"surrogate pair": {body: `oops p\u00e4ssw\u00f6rd\ud83d\ude00`, leaked: []string{`ssw\u00f6rd`, "sswörd"}},
		"escaped short":  {body: `pin \u0078\u0037 wrong`, leaked: []string{"x7", `\u0078`}, kept: []string{"pin", "wrong"}},
	} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, tc.body)
		})
		err := NewClient(Options{}).Call(context.Background(), "things", "sync", urlHook(srv.URL+"/sync?v=1"), request, &hooks.CompositeSyncResponse{}, CallOptions{})
		var se *StatusError
		if !errors.As(err, &se) {
			t.Fatalf("%s: err = %v, want *StatusError", name, err)
		}
		for _, leaked := range tc.leaked {
			if strings.Contains(se.Body, leaked) {
				t.Errorf("%s: the body shows %q: %q", name, leaked, se.Body)
			}
		}
		for _, kept := range tc.kept {
			if !strings.Contains(se.Body, kept) {
				t.Errorf("%s: the body lost %q: %q", name, kept, se.Body)
			}
		}
		if len(tc.leaked) > 0 && !strings.Contains(se.Body, redact.Redacted) {
			t.Errorf("%s: the body does not show %s: %q", name, redact.Redacted, se.Body)
		}
	}
	// A query value of the hook's URL below minScrubbed bytes is left: it
	// is more likely a version than a token.
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "version 1 is gone")
	})
	err := NewClient(Options{}).Call(context.Background(), "things", "sync", urlHook(srv.URL+"/sync?v=1"), sampleCompositeRequest("v1"), &hooks.CompositeSyncResponse{}, CallOptions{})
	var se *StatusError
	if !errors.As(err, &se) || !strings.Contains(se.Body, "version 1 is gone") {
		t.Errorf("a short query value was scrubbed: %v", err)
	}
}

// TestInvalidAnswerHidesEchoedSecrets: a 200 answer that is not JSON
// quotes its start in the error (hooks' bodyStart), scrubbed of the
// request's Secret values as an error body is.
func TestInvalidAnswerHidesEchoedSecrets(t *testing.T) {
	const value = "q7vXz-child-value-8f1c2d"
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": "ns", "name": "s"}, "data": map[string]any{"password": encoded}}}
	request := sampleCompositeRequest("v1")
	request.Children.Insert("v1", true, secret)
	srv := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "oops "+value+" is wrong")
	})
	err := NewClient(Options{}).Call(context.Background(), "things", "sync", urlHook(srv.URL+"/sync"), request, &hooks.CompositeSyncResponse{}, CallOptions{})
	var re *ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *ResponseError", err)
	}
	if strings.Contains(err.Error(), value[:8]) || !strings.Contains(err.Error(), `it starts "oops `+redact.Redacted) {
		t.Errorf("the error shows the Secret value, or not the answer's start with it redacted: %s", err)
	}
}
