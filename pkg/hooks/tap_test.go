/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
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

	if err := c.Call(context.Background(), "ctl", "sync", urlHook(ok.URL), request, &CompositeSyncResponse{}); err != nil {
		t.Fatal(err)
	}
	if len(tap.calls) != 0 {
		t.Fatalf("a call the Tap declined was given to it: %+v", tap.calls[0])
	}
	if err := c.Call(recorded, "ctl", "sync", urlHook(ok.URL), request, &CompositeSyncResponse{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(recorded, "ctl", "finalize", urlHook(failing.URL), request, &CompositeSyncResponse{}); err == nil {
		t.Fatal("a 500 succeeded")
	}
	// Not sent: nothing to record.
	if err := c.Call(recorded, "ctl", "sync", &v1alpha1.Hook{}, request, &CompositeSyncResponse{}); err == nil {
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
