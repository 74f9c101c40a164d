/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

var urlHook = hookfixture.URLHook

var serve = hookfixture.Serve

var answer = hookfixture.Answer

// answerChunked serves body without a Content-Length, in pieces of step
// bytes, each flushed: an answer whose length the client learns only at
// its end.
func answerChunked(body string, step int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for i := 0; i < len(body); i += step {
			_, _ = io.WriteString(w, body[i:min(i+step, len(body))])
			w.(http.Flusher).Flush()
		}
	}
}

func sampleCompositeRequest(version v1alpha1.HookVersion) *hooks.CompositeSyncRequest {
	parent := newObject("ctl.example.com/v1", "Thing", "ns", "p")
	parent.Object["spec"] = map[string]any{"replicas": int64(2)}
	children := hooks.NewObjectMap()
	children.EnsureKey("v1", "ConfigMap")
	children.EnsureKey("v1", "Pod")
	children.Insert(version, true, newObject("v1", "ConfigMap", "ns", "name-a"))
	related := hooks.NewObjectMap()
	related.Insert(version, true, newObject("ctl.example.com/v1", "Thing", "ns", "other"))
	return &hooks.CompositeSyncRequest{Controller: sampleController(), Parent: parent, Children: children, Related: related}
}

func TestCallSendsSpecShape(t *testing.T) {
	type seen struct {
		method, contentType, accept string
		body                        map[string]any
	}
	got := make(chan seen, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept")}
		if err := json.NewDecoder(r.Body).Decode(&s.body); err != nil {
			t.Errorf("server: %v", err)
		}
		got <- s
		_, _ = io.WriteString(w, `{"status":{"ok":true},"children":[`+childCM+`]}`)
	})

	var resp hooks.CompositeSyncResponse
	hook := urlHook(srv.URL + "/sync")
	if err := NewClient(Options{}).Call(context.Background(), "things", "sync", hook, sampleCompositeRequest(v1alpha1.HookVersionV1), &resp, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != http.MethodPost || s.contentType != "application/json" || s.accept != "application/json" {
		t.Errorf("method %s, Content-Type %q, Accept %q", s.method, s.contentType, s.accept)
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "name-a", "namespace": "ns"}}
	want := map[string]any{
		"controller": sampleController().Object,
		"parent": map[string]any{"apiVersion": "ctl.example.com/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "p", "namespace": "ns"}, "spec": map[string]any{"replicas": 2.0}},
		"children": map[string]any{"ConfigMap.v1": map[string]any{"name-a": cm}, "Pod.v1": map[string]any{}},
		"related": map[string]any{"Thing.ctl.example.com/v1": map[string]any{"other": map[string]any{
			"apiVersion": "ctl.example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "other", "namespace": "ns"}}}},
		"finalizing": false,
	}
	if diff := cmp.Diff(want, s.body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if resp.Status["ok"] != true || len(resp.Children) != 1 {
		t.Errorf("response %+v", resp)
	}
}

func TestCallDecoratorAndCustomizeShapes(t *testing.T) {
	bodies := make(chan map[string]any, 2)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		bodies <- body
		if r.URL.Path == "/customize" {
			_, _ = io.WriteString(w, `{"relatedResources":[{"apiVersion":"v1","resource":"secrets"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"labels":{"x":null},"status":null}`)
	})
	c := NewClient(Options{})
	obj := newObject("apps/v1", "StatefulSet", "ns", "db")
	attachments := hooks.NewObjectMap()
	attachments.EnsureKey("v1", "Service")
	var dresp hooks.DecoratorSyncResponse
	err := c.Call(context.Background(), "dec", "sync", urlHook(srv.URL+"/sync"),
		&hooks.DecoratorSyncRequest{Controller: sampleController(), Object: obj, Attachments: attachments, Finalizing: true}, &dresp, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body := <-bodies
	wantKeys := []string{"attachments", "controller", "finalizing", "object", "related"}
	if diff := cmp.Diff(wantKeys, sortedKeys(body)); diff != "" {
		t.Errorf("decorator request keys: %s", diff)
	}
	if diff := cmp.Diff(map[string]any{"Service.v1": map[string]any{}}, body["attachments"]); diff != "" {
		t.Errorf("attachments: %s", diff)
	}
	if diff := cmp.Diff(map[string]any{}, body["related"]); diff != "" {
		t.Errorf("nil related must be {}: %s", diff)
	}
	if body["finalizing"] != true {
		t.Errorf("finalizing = %v", body["finalizing"])
	}
	if _, ok := dresp.Labels["x"]; !ok || !dresp.StatusUnchanged() {
		t.Errorf("decorator response %+v", dresp)
	}

	var cresp hooks.CustomizeResponse
	if err := c.Call(context.Background(), "dec", "customize", urlHook(srv.URL+"/customize"),
		&hooks.CustomizeRequest{Controller: sampleController(), Parent: obj}, &cresp, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	body = <-bodies
	if diff := cmp.Diff([]string{"controller", "parent"}, sortedKeys(body)); diff != "" {
		t.Errorf("customize request keys: %s", diff)
	}
	if len(cresp.RelatedResources) != 1 || cresp.RelatedResources[0].Resource != "secrets" {
		t.Errorf("customize response %+v", cresp)
	}
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

func TestCallDecodeModeFollowsHookVersion(t *testing.T) {
	srv := serve(t, answer(`{"children":[],"extra":1}`))
	c := NewClient(Options{})
	call := func(version v1alpha1.HookVersion, mode *v1alpha1.ResponseUnMarshallMode) error {
		hook := urlHook(srv.URL)
		hook.Version = ptr.To(version)
		hook.Webhook.ResponseUnMarshallMode = mode
		var resp hooks.CompositeSyncResponse
		return c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &resp, CallOptions{})
	}
	if err := call(v1alpha1.HookVersionV1, nil); err != nil {
		t.Errorf("v1 (loose by default): %v", err)
	}
	var re *ResponseError
	if err := call(v1alpha1.HookVersionV2, nil); !errors.As(err, &re) || !strings.Contains(err.Error(), `"extra"`) {
		t.Errorf("v2 (strict by default): err = %v, want a ResponseError naming extra", err)
	}
	if err := call(v1alpha1.HookVersionV2, ptr.To(loose)); err != nil {
		t.Errorf("v2 loose: %v", err)
	}
	if err := call(v1alpha1.HookVersionV1, ptr.To(strict)); !errors.As(err, &re) {
		t.Errorf("v1 strict: err = %v, want a ResponseError", err)
	}
}

func TestCallStatusError(t *testing.T) {
	long := strings.Repeat("x", 5000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "boom: "+long)
	})
	err := NewClient(Options{}).Call(context.Background(), "things", "sync", urlHook(srv.URL+"/sync"), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %#v, want *StatusError", err)
	}
	if se.Code != 500 || !strings.HasPrefix(se.Body, "boom: xxx") || len(se.Body) != MaxStatusErrorBody {
		t.Errorf("code %d, body %d bytes %.20q", se.Code, len(se.Body), se.Body)
	}
	for _, want := range []string{"sync hook", srv.URL + "/sync", "HTTP 500", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err.Error(), want)
		}
	}
	// The caller names the controller (once); the message does not.
	if se.Controller != "things" || strings.Contains(err.Error(), "things") {
		t.Errorf("controller %q, message %q: want the name in the field only", se.Controller, err)
	}
	if IsUnreachable(err) {
		t.Error("IsUnreachable(500) = true")
	}
	if _, ok := se.RetryAfterDelay(); ok {
		t.Error("RetryAfterDelay of a 500 ok")
	}
}

func TestCallOnlyOKIsSuccess(t *testing.T) {
	for _, code := range []int{http.StatusCreated, http.StatusNoContent, http.StatusNotModified, http.StatusNotFound} {
		srv := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) })
		err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Errorf("HTTP %d: err = %v, want StatusError", code, err)
		}
	}
}

func TestCallRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header string
		want   time.Duration
		ok     bool
	}{
		{"seconds", "30", 30 * time.Second, true},
		{"http date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"past date", now.Add(-time.Minute).Format(http.TimeFormat), 0, false},
		{"zero", "0", 0, false},
		{"garbage", "soon", 0, false},
		{"negative", "-5", 0, false},
		{"missing", "", 0, false},
		{"huge", "99999999999999999", MaxRetryAfter, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(http.StatusTooManyRequests)
			})
			c := NewClient(Options{})
			c.now = func() time.Time { return now }
			err := c.Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
			var se *StatusError
			if !errors.As(err, &se) || se.Code != http.StatusTooManyRequests {
				t.Fatalf("err = %v, want a 429 StatusError", err)
			}
			d, ok := se.RetryAfterDelay()
			if d != tc.want || ok != tc.ok {
				t.Errorf("RetryAfterDelay = %s, %v; want %s, %v", d, ok, tc.want, tc.ok)
			}
			if se.RetryAfter != tc.want {
				t.Errorf("StatusError.RetryAfter = %s", se.RetryAfter)
			}
		})
	}
}

func TestParseRetryAfterRoundsDatesUp(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 400*int(time.Millisecond), time.UTC)
	date := time.Date(2030, 1, 2, 3, 4, 35, 0, time.UTC).Format(http.TimeFormat)
	if got := parseRetryAfter(date, now); got != 30*time.Second {
		t.Errorf("got %s, want 30s", got)
	}
}

func TestCallConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(url+"/sync"), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	var ue *UnreachableError
	if !errors.As(err, &ue) || !IsUnreachable(err) {
		t.Fatalf("err = %#v, want *UnreachableError", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("cause %#v is not a *net.OpError", ue.Err)
	}
	if ue.Timeout() {
		t.Error("Timeout() = true for a refused connection")
	}
	if !strings.Contains(err.Error(), url+"/sync") || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("message %q", err)
	}
}

func TestCallDNSFailure(t *testing.T) {
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook("http://does-not-exist.invalid/sync"), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	if !IsUnreachable(err) {
		t.Fatalf("err = %v, want UnreachableError", err)
	}
}

// blockingServer answers only when the client gives up (or the test ends).
func blockingServer(t *testing.T, beforeBlock func(w http.ResponseWriter)) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if beforeBlock != nil {
			beforeBlock(w)
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv
}

func TestCallTimeout(t *testing.T) {
	for _, tc := range []struct {
		name        string
		beforeBlock func(w http.ResponseWriter)
	}{
		{"no headers", nil},
		{"headers then stalled body", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{"children":[`)
			w.(http.Flusher).Flush()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := blockingServer(t, tc.beforeBlock)
			hook := urlHook(srv.URL)
			hook.Webhook.Timeout = &metav1.Duration{Duration: 200 * time.Millisecond}
			var observed []int
			c := NewClient(Options{Metrics: ObserverFunc(func(_, _ string, code int, _ time.Duration) { observed = append(observed, code) })})
			start := time.Now()
			err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
			elapsed := time.Since(start)
			var ue *UnreachableError
			if !errors.As(err, &ue) || !ue.Timeout() {
				t.Fatalf("err = %v, want an UnreachableError that is a timeout", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Error("error does not wrap context.DeadlineExceeded")
			}
			if !strings.Contains(err.Error(), "200ms") {
				t.Errorf("message %q does not say the timeout", err)
			}
			if elapsed < 200*time.Millisecond || elapsed > 5*time.Second {
				t.Errorf("call took %s with a 200ms timeout", elapsed)
			}
			if len(observed) != 1 {
				t.Errorf("observed %v, want one call", observed)
			}
		})
	}
}

func TestCallCallerCancellationIsNotUnreachable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The caller gives up while the hook is working on the request.
	srv := blockingServer(t, func(http.ResponseWriter) { cancel() })
	err := NewClient(Options{}).Call(ctx, "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	if !errors.Is(err, context.Canceled) || IsUnreachable(err) {
		t.Fatalf("err = %#v, want context.Canceled and not UnreachableError", err)
	}
}

func TestCallTruncatedBody(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"children":[`)
		// The handler returns: the connection is closed short of 100 bytes.
	})
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	if !IsUnreachable(err) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want an UnreachableError wrapping io.ErrUnexpectedEOF", err)
	}
}

func TestCallBodyLimit(t *testing.T) {
	big := `{"status":{"x":"` + strings.Repeat("a", 2000) + `"}}`
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"content-length", answer(big)},
		{"chunked", answerChunked(big, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.handler)
			err := NewClient(Options{MaxResponseBytes: 1000}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
			var re *ResponseError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "1000 bytes") {
				t.Fatalf("err = %v, want a ResponseError naming the limit", err)
			}
		})
	}
	// Exactly at the limit is fine.
	srv := serve(t, answer(big))
	if err := NewClient(Options{MaxResponseBytes: int64(len(big))}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

func TestCallResponseErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`not json`, "invalid"},
		{`{"status":"fine"}`, "status is a string"},
		{`{"children":[{"kind":"ConfigMap","metadata":{"name":"a"}}]}`, "children[0]: apiVersion is required"},
	} {
		srv := serve(t, answer(tc.body))
		err := NewClient(Options{}).Call(context.Background(), "things", "finalize", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
		var re *ResponseError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "finalize hook") {
			t.Errorf("%s: err = %v, want a ResponseError containing %q", tc.body, err, tc.want)
		}
	}
}

func TestCallServiceURL(t *testing.T) {
	type seen struct{ host, path string }
	got := make(chan seen, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Host, r.URL.Path}
		_, _ = io.WriteString(w, `{}`)
	})
	// Dial the test server whatever the address, and record the address.
	dialed := make(chan string, 1)
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed <- addr
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	t.Cleanup(transport.CloseIdleConnections)
	c := NewClient(Options{Transport: TransportFunc(func(*v1alpha1.Hook) (*http.Client, error) {
		return &http.Client{Transport: transport}, nil
	})})
	// The protocol may be spelled in capitals, as metacontroller allows.
	hook := &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{
		Service: &v1alpha1.ServiceReference{Name: "svc", Namespace: "hooks", Port: ptr.To[int32](8080), Protocol: ptr.To("HTTP")},
		Path:    ptr.To("/sync/things"),
	}}
	if err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if addr := <-dialed; addr != "svc.hooks:8080" {
		t.Errorf("dialed %q, want svc.hooks:8080", addr)
	}
	if s := <-got; s.host != "svc.hooks:8080" || s.path != "/sync/things" {
		t.Errorf("server saw host %q path %q", s.host, s.path)
	}
}

// A webhook with both url and service is called at its url, as
// metacontroller documents.
func TestCallURLWinsOverService(t *testing.T) {
	paths := make(chan string, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		_, _ = io.WriteString(w, `{}`)
	})
	hook := &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{
		URL:     ptr.To(srv.URL + "/by-url"),
		Service: &v1alpha1.ServiceReference{Name: "svc", Namespace: "nowhere.invalid"},
		Path:    ptr.To("/by-service"),
	}}
	if err := NewClient(Options{}).Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := <-paths; p != "/by-url" {
		t.Errorf("the hook was called at %q, want /by-url", p)
	}
}

func TestCallConfigErrors(t *testing.T) {
	c := NewClient(Options{})
	for name, hook := range map[string]*v1alpha1.Hook{
		"nil hook":      nil,
		"no webhook":    {},
		"relative url":  urlHook("/sync"),
		"ftp url":       urlHook("ftp://h/sync"),
		"unparseable":   urlHook("http://user:s3cret@h:port/sync"),
		"no url or svc": {Webhook: &v1alpha1.Webhook{}},
	} {
		err := c.Call(context.Background(), "ctl", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if IsUnreachable(err) || strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), "sync hook ") || strings.Contains(err.Error(), "ctl") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Userinfo (and the query) never show in messages, of the error or of any
// error it wraps.
func TestCallErrorsHideCredentials(t *testing.T) {
	srv500 := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
			t.Errorf("server: basic auth %q %q %v", u, p, ok)
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, base := range []string{srv500.URL, closed.URL} {
		url := strings.Replace(base, "http://", "http://alice:s3cret@", 1) + "/sync?token=t0ken"
		err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(url), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
		if err == nil {
			t.Fatal("no error")
		}
		if !strings.Contains(err.Error(), strings.Replace(base, "http://", "http://<redacted>@", 1)+"/sync?token=<redacted>") {
			t.Errorf("message %q does not show the redacted URL", err)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			for _, secret := range []string{"alice", "s3cret", "t0ken"} {
				if strings.Contains(e.Error(), secret) {
					t.Errorf("message %q shows %q", e.Error(), secret)
				}
			}
		}
	}
}

func TestCallTLS(t *testing.T) {
	srv := httptest.NewTLSServer(answer(`{}`))
	t.Cleanup(srv.Close)

	// The default client verifies certificates.
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	var certErr *tls.CertificateVerificationError
	if !IsUnreachable(err) || !errors.As(err, &certErr) {
		t.Fatalf("untrusted certificate: err = %v, want an UnreachableError for the certificate", err)
	}

	trusting := func() *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		tr := NewTransport()
		tr.TLSClientConfig.RootCAs = pool
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	if err := NewClient(Options{HTTPClient: trusting()}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatalf("trusted certificate: %v", err)
	}

	// TLS 1.1 is refused.
	old := httptest.NewUnstartedServer(answer(`{}`))
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS11}
	old.StartTLS()
	t.Cleanup(old.Close)
	pool := x509.NewCertPool()
	pool.AddCert(old.Certificate())
	tr := NewTransport()
	tr.TLSClientConfig.RootCAs = pool
	t.Cleanup(tr.CloseIdleConnections)
	err = NewClient(Options{HTTPClient: &http.Client{Transport: tr}}).Call(context.Background(), "c", "sync", urlHook(old.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	if !IsUnreachable(err) || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1 server: err = %v, want an UnreachableError for the protocol version", err)
	}
}

func TestDefaultTransport(t *testing.T) {
	tr, ok := DefaultHTTPClient().Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T", DefaultHTTPClient().Transport)
	}
	if tr.TLSClientConfig.MinVersion != tls.VersionTLS12 || tr.TLSClientConfig.InsecureSkipVerify {
		t.Errorf("TLS config %+v", tr.TLSClientConfig)
	}
	if tr.MaxIdleConnsPerHost < 100 {
		t.Errorf("MaxIdleConnsPerHost = %d", tr.MaxIdleConnsPerHost)
	}
	if first, second := DefaultHTTPClient(), DefaultHTTPClient(); first != second || NewClient(Options{}).httpClient != first {
		t.Error("default client not shared")
	}
	if DefaultHTTPClient().Timeout != 0 {
		t.Error("the default client must leave timeouts to the hooks")
	}
}

func TestCallSeams(t *testing.T) {
	headers := make(chan http.Header, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		_, _ = io.WriteString(w, `{}`)
	})
	hook := urlHook(srv.URL)
	var gotHook *v1alpha1.Hook
	c := NewClient(Options{
		Transport: TransportFunc(func(h *v1alpha1.Hook) (*http.Client, error) {
			gotHook = h
			return nil, nil // fall back to the default client
		}),
		PrepareRequest: RequestPreparerFunc(func(h *v1alpha1.Hook, req *http.Request) error {
			body, err := req.GetBody()
			if err != nil {
				return err
			}
			defer body.Close()
			b, _ := io.ReadAll(body)
			req.Header.Set("Authorization", "Bearer x")
			req.Header.Set("X-Body-Length", fmt.Sprint(len(b)))
			return nil
		}),
	})
	if err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if gotHook != hook {
		t.Error("TransportFor did not get the hook")
	}
	h := <-headers
	if h.Get("Authorization") != "Bearer x" || h.Get("X-Body-Length") != h.Get("Content-Length") {
		t.Errorf("headers %v", h)
	}

	sentinel := errors.New("secret not found")
	c = NewClient(Options{Transport: TransportFunc(func(*v1alpha1.Hook) (*http.Client, error) { return nil, sentinel })})
	if err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); !errors.Is(err, sentinel) {
		t.Errorf("TransportFor error: %v", err)
	}
	c = NewClient(Options{PrepareRequest: RequestPreparerFunc(func(*v1alpha1.Hook, *http.Request) error { return sentinel })})
	if err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); !errors.Is(err, sentinel) {
		t.Errorf("PrepareRequest error: %v", err)
	}
}

func TestCallMetrics(t *testing.T) {
	type obs struct {
		controller, hook string
		code             int
	}
	var mu sync.Mutex
	var got []obs
	c := NewClient(Options{Metrics: ObserverFunc(func(controller, hook string, code int, d time.Duration) {
		if d < 0 {
			t.Errorf("negative duration %s", d)
		}
		mu.Lock()
		got = append(got, obs{controller, hook, code})
		mu.Unlock()
	})})
	ok := serve(t, answer(`{}`))
	bad := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	_ = c.Call(context.Background(), "a", "sync", urlHook(ok.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	_ = c.Call(context.Background(), "b", "finalize", urlHook(bad.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	_ = c.Call(context.Background(), "c", "customize", urlHook(closed.URL), &hooks.CustomizeRequest{}, &hooks.CustomizeResponse{}, CallOptions{})
	_ = c.Call(context.Background(), "d", "sync", nil, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}) // not sent: not observed
	want := []obs{{"a", "sync", 200}, {"b", "finalize", 503}, {"c", "customize", 0}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(obs{})); diff != "" {
		t.Error(diff)
	}
}

func TestCallConcurrent(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		var req hooks.CompositeSyncRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// Echo the parent's name in a child, to catch crossed bodies.
		fmt.Fprintf(w, `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}]}`, req.Parent.GetName())
	})
	c := NewClient(Options{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 10 {
				name := fmt.Sprintf("p-%d-%d", i, j)
				req := &hooks.CompositeSyncRequest{Parent: newObject("v1", "Thing", "ns", name), Children: hooks.NewObjectMap()}
				var resp hooks.CompositeSyncResponse
				if err := c.Call(context.Background(), "c", "sync", urlHook(srv.URL), req, &resp, CallOptions{}); err != nil {
					t.Error(err)
					return
				}
				if got := resp.Children[0].GetName(); got != name {
					t.Errorf("sent %s, got back %s", name, got)
				}
			}
		})
	}
	wg.Wait()
}

func TestCallNilResponseDiscards(t *testing.T) {
	srv := serve(t, answer(`whatever`))
	if err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL), map[string]any{"x": 1}, nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestCallEncodeError(t *testing.T) {
	srv := serve(t, answer(`{}`))
	req := &hooks.CompositeSyncRequest{Parent: &unstructured.Unstructured{Object: map[string]any{"bad": func() {}}}}
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL), req, &hooks.CompositeSyncResponse{}, CallOptions{})
	if err == nil || !strings.Contains(err.Error(), "encoding the request") {
		t.Fatalf("err = %v", err)
	}
}

// hijackAndClose returns a handler that reads the request, then closes the
// connection without a word, as a hook that crashes mid-request does; with
// reset, it resets the connection (SO_LINGER 0) instead.
func hijackAndClose(t *testing.T, reset bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok && reset {
			_ = tcp.SetLinger(0)
		}
		_ = conn.Close()
	}
}

func TestCallHookClosedConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reset bool
	}{{"closed", false}, {"reset", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, hijackAndClose(t, tc.reset))
			err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL+"/sync"), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
			var ue *UnreachableError
			if !errors.As(err, &ue) || !ue.ClosedByHook() {
				t.Fatalf("err = %#v, want an UnreachableError closed by the hook", err)
			}
			msg := err.Error()
			want := "sync hook " + srv.URL + "/sync: the hook closed the connection without answering (did it crash?)"
			if !strings.HasPrefix(msg, want) {
				t.Errorf("message %q, want it to start with %q", msg, want)
			}
			if strings.Contains(msg, "unreachable") || strings.HasSuffix(msg, "EOF") {
				t.Errorf("message %q says unreachable or EOF", msg)
			}
			if ue.Timeout() {
				t.Error("Timeout() = true")
			}
		})
	}
}

func TestCallHookClosedConnectionMidBody(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"children":[`)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(srv.URL), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	var ue *UnreachableError
	if !errors.As(err, &ue) || !ue.ClosedByHook() || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want an UnreachableError closed by the hook, wrapping io.ErrUnexpectedEOF", err)
	}
	if !strings.Contains(err.Error(), "the hook closed the connection before the end of its answer (did it crash?)") {
		t.Errorf("message %q", err)
	}
}

func TestCallConnectionRefusedIsNotClosedByHook(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := NewClient(Options{}).Call(context.Background(), "c", "sync", urlHook(url), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.ClosedByHook() {
		t.Fatalf("err = %v, want an UnreachableError not closed by the hook", err)
	}
}

// TestReplicaHeader checks that every call carries Options.Replica as the
// Metactl-Replica header, and that a client without one sends no such
// header (not an empty one).
func TestReplicaHeader(t *testing.T) {
	headers := make(chan http.Header, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		_, _ = io.WriteString(w, `{}`)
	})
	hook := urlHook(srv.URL)
	for _, replica := range []string{"host-a_1f2e", ""} {
		c := NewClient(Options{Replica: replica})
		if err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		h := <-headers
		got, sent := h["Metactl-Replica"]
		switch {
		case replica != "" && (len(got) != 1 || got[0] != replica):
			t.Errorf("Replica %q: header Metactl-Replica %q, want exactly %q", replica, got, replica)
		case replica == "" && sent:
			t.Errorf("no Replica: header Metactl-Replica %q sent, want none", got)
		}
	}
}
