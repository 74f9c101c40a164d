package engine

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestSyncSpan: with a Tracer each sync is one root span, ended with its
// object, result and reason; a failed sync's span has status Error.
func TestSyncSpan(t *testing.T) {
	fail := false
	f := newFixture(t, thing(), false, func(name string, request *fakeRequest) (*fakeResponse, error) {
		if fail {
			return nil, errors.New("hook down")
		}
		return countChildren(name, request)
	})
	spans := tracetest.NewSpanRecorder()
	f.e.opts.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test")
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := f.sync(t); err == nil {
		t.Fatal("no error from a failing hook")
	}
	// The syncs' spans, and the status write's, a child of the first.
	var ended []sdktrace.ReadOnlySpan
	var writes int
	for _, s := range spans.Ended() {
		if s.Name() == "patch status" {
			writes++
			continue
		}
		ended = append(ended, s)
	}
	if len(ended) != 2 || writes != 1 {
		t.Fatalf("%d sync spans and %d status writes', want 2 and 1", len(ended), writes)
	}
	if w := spans.Ended()[0]; w.Name() != "patch status" || w.Parent().SpanID() != ended[0].SpanContext().SpanID() {
		t.Errorf("first span %q under %v, want the status write under the first sync", w.Name(), w.Parent().SpanID())
	}
	for i, want := range []map[string]string{
		{"metactl.sync.result": "success", "metactl.sync.reason": "Synced"},
		{"metactl.sync.result": "error", "metactl.sync.reason": "SyncFailed"},
	} {
		s := ended[i]
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		want["metactl.controller"], want["metactl.controller.kind"], want["metactl.parent"] = "test", "TestController", "things.example.com/ns/p"
		for k, v := range want {
			if attrs[k] != v {
				t.Errorf("sync %d: %s = %q, want %q (all: %v)", i, k, attrs[k], v, attrs)
			}
		}
		if s.Name() != "sync testcontroller/test" || s.Parent().IsValid() {
			t.Errorf("sync %d: span %q with parent %v, want a root sync testcontroller/test", i, s.Name(), s.Parent())
		}
	}
	if ended[0].Status().Code == codes.Error || ended[1].Status().Code != codes.Error {
		t.Errorf("statuses %v and %v, want unset then Error", ended[0].Status(), ended[1].Status())
	}
}
