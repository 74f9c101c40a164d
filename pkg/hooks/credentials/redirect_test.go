/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// redirectTarget is a server a hook redirects to; it records every request
// it receives.
type redirectTarget struct {
	*httptest.Server
	mu       sync.Mutex
	received []string // method, Authorization and body of each request
}

func newRedirectTarget(t *testing.T) *redirectTarget {
	rt := &redirectTarget{}
	rt.Server = serve(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rt.mu.Lock()
		rt.received = append(rt.received, r.Method+" "+r.Header.Get("Authorization")+" "+string(body))
		rt.mu.Unlock()
		_, _ = io.WriteString(w, `{}`)
	})
	return rt
}

func (rt *redirectTarget) requests() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.received...)
}

// redirectTo answers every request with code and a Location of location,
// after recording the Authorization it was sent.
func redirectTo(code int, location string, auth chan<- string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if auth != nil {
			auth <- r.Header.Get("Authorization")
		}
		w.Header().Set("Location", location)
		w.WriteHeader(code)
	}
}

// A hook answering with a redirect is not followed, by any of the HTTP
// clients a hook call may use: the target receives nothing (neither the
// body nor the credentials), and the error is a *StatusError naming the
// status and the Location.
func TestCallDoesNotFollowRedirects(t *testing.T) {
	target := newRedirectTarget(t)
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	_, src := newSource(t, secretObj("hooks", "token", map[string]string{"token": "s3cret"}))
	secure, _ := secureClient(t, src)

	clients := []struct {
		name   string
		client *hookclient.Client
		tls    bool // the hook is served over TLS, with caBundle and authorization
	}{
		{"default client", hookclient.NewClient(hookclient.Options{}), false},
		{"own HTTP client with Go's default redirect policy", hookclient.NewClient(hookclient.Options{HTTPClient: &http.Client{}}), false},
		{"own HTTP client that follows redirects", hookclient.NewClient(hookclient.Options{HTTPClient: &http.Client{CheckRedirect: followRedirects}}), false},
		{"Transport giving a client that follows redirects", hookclient.NewClient(hookclient.Options{Transport: hookclient.TransportFunc(func(*v1alpha1.Hook) (*http.Client, error) {
			return &http.Client{CheckRedirect: followRedirects}, nil
		})}), false},
		{"SecureTransport, authorization", secure, false},
		{"SecureTransport, caBundle and authorization", secure, true},
	}
	codes := []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}
	for _, c := range clients {
		for _, code := range codes {
			t.Run(c.name+"/"+http.StatusText(code), func(t *testing.T) {
				auth := make(chan string, 1)
				location := target.URL + "/new?token=in-query"
				var hookURL string
				if c.tls {
					hookURL = tlsServer(t, serverCert, redirectTo(code, location, auth), nil).URL
				} else {
					hookURL = serve(t, redirectTo(code, location, auth)).URL
				}
				hook := hookWith(hookURL+"/old", func(w *v1alpha1.Webhook) {
					if c.client != secure {
						return
					}
					w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "hooks", Name: "token"}}
					if c.tls {
						w.CABundle = &v1alpha1.CABundleConfig{Inline: new(string(ca.pem))}
					}
				})
				err := c.client.Call(context.Background(), "ctl", "sync", hook, sampleCompositeRequest(v1alpha1.HookVersionV1), &hooks.CompositeSyncResponse{}, hookclient.CallOptions{})
				var se *hookclient.StatusError
				if !errors.As(err, &se) {
					t.Fatalf("err = %v (%T), want a *StatusError", err, err)
				}
				if se.Code != code || se.Location != target.URL+"/new?token=<redacted>" {
					t.Errorf("Code %d, Location %q; want %d, %q", se.Code, se.Location, code, target.URL+"/new?token=<redacted>")
				}
				msg := err.Error()
				for _, want := range []string{http.StatusText(code), "to " + target.URL + "/new", "does not follow redirects", "final URL"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q does not say %q", msg, want)
					}
				}
				if strings.Contains(msg, "in-query") {
					t.Errorf("message %q shows the Location's query", msg)
				}
				if got, want := <-auth, map[bool]string{true: "Bearer s3cret"}[c.client == secure]; got != want {
					t.Errorf("the hook received Authorization %q, want %q", got, want)
				}
				if got := target.requests(); len(got) > 0 {
					t.Errorf("the redirect's target received %q", got)
				}
			})
		}
	}
}

// followRedirects is a CheckRedirect that follows every redirect.
func followRedirects(*http.Request, []*http.Request) error { return nil }

// A relative Location is named resolved against the hook's URL; a
// redirect without a Location says so without one.
func TestCallRedirectLocation(t *testing.T) {
	relative := serve(t, redirectTo(http.StatusTemporaryRedirect, "/elsewhere", nil))
	err := call(hookclient.NewClient(hookclient.Options{}), urlHook(relative.URL+"/sync"))
	var se *hookclient.StatusError
	if !errors.As(err, &se) || se.Location != relative.URL+"/elsewhere" {
		t.Errorf("relative Location: err = %v, want a *StatusError with Location %s", err, relative.URL+"/elsewhere")
	}
	none := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusFound) })
	err = call(hookclient.NewClient(hookclient.Options{}), urlHook(none.URL))
	if !errors.As(err, &se) || se.Location != "" || !strings.Contains(err.Error(), "HTTP 302 Found: metactl does not follow redirects") {
		t.Errorf("no Location: err = %v", err)
	}
}
