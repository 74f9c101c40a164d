/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

type tapKey struct{}

// recordingTap records the calls under a context carrying tapKey.
type recordingTap struct {
	mu    sync.Mutex
	calls []*TappedCall
}

func (t *recordingTap) Recording(ctx context.Context) bool { return ctx.Value(tapKey{}) != nil }

func (t *recordingTap) Record(_ context.Context, c *TappedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, c)
}

func TestTapIsGivenTheCallsItRecords(t *testing.T) {
	ok := serve(t, answer(`{"status":{"a":1}}`))
	failing := serve(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "broken", http.StatusInternalServerError) })
	tap := &recordingTap{}
	c := NewClient(Options{Tap: tap})
	recorded := context.WithValue(context.Background(), tapKey{}, true)
	request := map[string]any{"parent": map[string]any{"kind": "Thing"}}

	if err := c.Call(context.Background(), "ctl", "sync", urlHook(ok.URL), request, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(tap.calls) != 0 {
		t.Fatalf("a call the Tap declined was given to it: %+v", tap.calls[0])
	}
	if err := c.Call(recorded, "ctl", "sync", urlHook(ok.URL), request, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(recorded, "ctl", "finalize", urlHook(failing.URL), request, &hooks.CompositeSyncResponse{}, CallOptions{}); err == nil {
		t.Fatal("a 500 succeeded")
	}
	// Not sent: nothing to record.
	if err := c.Call(recorded, "ctl", "sync", &v1alpha1.Hook{}, request, &hooks.CompositeSyncResponse{}, CallOptions{}); err == nil {
		t.Fatal("a hook without webhook succeeded")
	}
	if len(tap.calls) != 2 {
		t.Fatalf("%d calls recorded, want 2", len(tap.calls))
	}
	got := tap.calls[0]
	if got.Controller != "ctl" || got.Hook != "sync" || string(got.Request) != `{"parent":{"kind":"Thing"}}` || got.Code != 200 ||
		string(got.Response) != `{"status":{"a":1}}` || got.Err != nil || got.Start.IsZero() {
		t.Errorf("successful call recorded as %+v (request %s, response %s)", got, got.Request, got.Response)
	}
	got = tap.calls[1]
	if got.Hook != "finalize" || got.Code != 500 || got.Response != nil || got.Err == nil {
		t.Errorf("failed call recorded as %+v", got)
	}
}

// TestTapErrorScrubbed: a failed call's error, as the Tap is given it (what
// a recording keeps as the call's error), holds none of the Secret data the
// hook echoed from its request; the request itself is given as sent.
func TestTapErrorScrubbed(t *testing.T) {
	const value = "q7vXz-tap-value-8f1c2d"
	encoded := base64.StdEncoding.EncodeToString([]byte(value))
	request := sampleCompositeRequest("v1")
	request.Children.Insert("v1", true, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": "ns", "name": "s"}, "data": map[string]any{"password": encoded}}})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "cannot use "+value+" in "+string(body))
	})
	tap := &recordingTap{}
	c := NewClient(Options{Tap: tap})
	recorded := context.WithValue(context.Background(), tapKey{}, true)
	if err := c.Call(recorded, "ctl", "sync", urlHook(srv.URL), request, &hooks.CompositeSyncResponse{}, CallOptions{}); err == nil {
		t.Fatal("a 500 succeeded")
	}
	if len(tap.calls) != 1 || tap.calls[0].Err == nil || tap.calls[0].Code != 500 {
		t.Fatalf("tapped %+v", tap.calls)
	}
	got := tap.calls[0]
	for _, leaked := range []string{value, encoded} {
		if strings.Contains(got.Err.Error(), leaked) {
			t.Errorf("the tapped error shows %q: %s", leaked, got.Err)
		}
	}
	if !strings.Contains(got.Err.Error(), "cannot use "+redact.Redacted) {
		t.Errorf("the tapped error lost the hook's text: %s", got.Err)
	}
	if !strings.Contains(string(got.Request), encoded) {
		t.Errorf("the tapped request is not as sent: %s", got.Request)
	}
}

// TestTapEtagCachedAnswer: with etag, a call answered 304 or 412 is given
// to the Tap with that code and the cached answer it stands for.
func TestTapEtagCachedAnswer(t *testing.T) {
	for _, code := range []int{http.StatusNotModified, http.StatusPreconditionFailed} {
		es := &etagServer{}
		es.use412.Store(code == http.StatusPreconditionFailed)
		srv := serve(t, es.handler)
		tap := &recordingTap{}
		c := NewClient(Options{Tap: tap})
		recorded := context.WithValue(context.Background(), tapKey{}, true)
		hook := etagHook(srv.URL, 60)
		req := sampleCompositeRequest(v1alpha1.HookVersionV1)
		for range 2 {
			if err := c.Call(recorded, "ctl", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, last := es.last(); last != code {
			t.Fatalf("the hook answered %d, want %d", last, code)
		}
		if len(tap.calls) != 2 {
			t.Fatalf("%d calls tapped, want 2", len(tap.calls))
		}
		first, second := tap.calls[0], tap.calls[1]
		if first.Code != 200 || second.Code != code || second.Err != nil {
			t.Errorf("%d: tapped codes %d, %d (err %v)", code, first.Code, second.Code, second.Err)
		}
		if len(first.Response) == 0 || string(second.Response) != string(first.Response) {
			t.Errorf("%d: tapped answer %q, want the cached %q", code, second.Response, first.Response)
		}
	}
}
