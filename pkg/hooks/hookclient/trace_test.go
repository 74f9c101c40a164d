/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/metactl/metactl/pkg/hooks"
)

// traceparentServer answers {} and keeps the traceparent and tracestate
// headers of each request.
func traceparentServer(t *testing.T) (url string, got func() (parents, states []string)) {
	var mu sync.Mutex
	var parents, states []string
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		states = append(states, r.Header.Get("tracestate"))
		mu.Unlock()
		_, _ = w.Write([]byte("{}"))
	})
	return s.URL, func() ([]string, []string) {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), parents...), append([]string(nil), states...)
	}
}

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-01$`)

// Without a Tracer every request still carries a traceparent: the
// context's span context, else fresh ids (a new trace per call).
func TestCallCarriesTraceparentWithoutTracer(t *testing.T) {
	url, got := traceparentServer(t)
	c := NewClient(Options{})
	for range 2 {
		if err := c.Call(context.Background(), "c", "sync", urlHook(url), sampleCompositeRequest("v1"), nil, CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	state, _ := trace.ParseTraceState("vendor=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: state})
	if err := c.Call(trace.ContextWithSpanContext(context.Background(), sc), "c", "sync", urlHook(url), sampleCompositeRequest("v1"), nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	parents, states := got()
	if len(parents) != 3 {
		t.Fatalf("%d requests, want 3", len(parents))
	}
	for _, p := range parents[:2] {
		if !traceparentRE.MatchString(p) {
			t.Errorf("traceparent %q, want a valid sampled one", p)
		}
	}
	if parents[0][3:35] == parents[1][3:35] {
		t.Errorf("two calls without a trace share the trace id %s", parents[0][3:35])
	}
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; parents[2] != want || states[2] != "vendor=x" {
		t.Errorf("under a span context: traceparent %q tracestate %q, want %q and vendor=x", parents[2], states[2], want)
	}
}

// With a Tracer the call has its own span, a child of the context's,
// whose id the hook gets; a failed call's span carries the code and the
// error.
func TestCallSpan(t *testing.T) {
	url, got := traceparentServer(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tracer := tp.Tracer("test")
	c := NewClient(Options{Tracer: tracer})
	ctx, parent := tracer.Start(context.Background(), "sync")
	if err := c.Call(ctx, "c", "customize", urlHook(url), sampleCompositeRequest("v1"), nil, CallOptions{Retry: true}); err != nil {
		t.Fatal(err)
	}
	failing := serve(t, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusTeapot) })
	if err := c.Call(ctx, "c", "sync", urlHook(failing.URL), sampleCompositeRequest("v1"), nil, CallOptions{}); err == nil {
		t.Fatal("no error from a 418")
	}
	parent.End()
	ended := spans.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want 3", len(ended))
	}
	call, failed := ended[0], ended[1]
	if call.Name() != "hook customize" || call.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("span %q with parent %s, want hook customize under %s", call.Name(), call.Parent().SpanID(), parent.SpanContext().SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range call.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for key, want := range map[string]string{"metactl.controller": "c", "metactl.hook": "customize", "metactl.hook.retry": "true",
		"http.response.status_code": "200", "http.response.body.size": "2"} {
		if attrs[key] != want {
			t.Errorf("span attribute %s = %q, want %q (all: %v)", key, attrs[key], want, attrs)
		}
	}
	if attrs["http.request.body.size"] == "" || attrs["http.request.body.size"] == "0" {
		t.Errorf("no request size: %v", attrs)
	}
	parents, _ := got()
	if want := "00-" + call.SpanContext().TraceID().String() + "-" + call.SpanContext().SpanID().String() + "-01"; parents[0] != want {
		t.Errorf("hook got traceparent %q, want its call's span %q", parents[0], want)
	}
	if failed.Status().Code.String() != "Error" || failed.Name() != "hook sync" {
		t.Errorf("failed call's span %q status %v, want hook sync, Error", failed.Name(), failed.Status())
	}
	code := int64(-1)
	for _, kv := range failed.Attributes() {
		if kv.Key == "http.response.status_code" {
			code = kv.Value.AsInt64()
		}
	}
	if code != http.StatusTeapot {
		t.Errorf("failed call's http.response.status_code %d (-1: absent), want 418", code)
	}
}

// discardExporter drops the spans it is given.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkCallSyncTraced is BenchmarkCallSync with export on: a span per
// call, under a sync's span, batched to an exporter that drops them.
func BenchmarkCallSyncTraced(b *testing.B) {
	respBody := benchResponse(b)
	srv := httptest.NewServer(answer(string(respBody)))
	defer srv.Close()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	c := NewClient(Options{Tracer: tp.Tracer("bench")})
	hook := urlHook(srv.URL + "/sync")
	req := benchRequest()
	ctx, span := tp.Tracer("bench").Start(context.Background(), "sync")
	defer span.End()
	b.ReportAllocs()
	for b.Loop() {
		var resp hooks.CompositeSyncResponse
		if err := c.Call(ctx, "bench", "sync", hook, req, &resp, CallOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
