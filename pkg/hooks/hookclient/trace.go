/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/metactl/metactl/internal/traceid"
)

// The attributes of a hook call's span (docs/tracing.md).
const (
	AttrController    = attribute.Key("metactl.controller")
	AttrHook          = attribute.Key("metactl.hook")
	AttrRetry         = attribute.Key("metactl.hook.retry")
	AttrRetryAfter    = attribute.Key("metactl.hook.retry_after_seconds")
	AttrURL           = attribute.Key("url.full")
	AttrStatusCode    = attribute.Key("http.response.status_code")
	AttrRequestBytes  = attribute.Key("http.request.body.size")
	AttrResponseBytes = attribute.Key("http.response.body.size")
)

// traceContext writes and reads the W3C traceparent and tracestate
// headers.
var traceContext = propagation.TraceContext{}

// callSpan is the span of one hook call, nil when none is recorded; its
// methods do nothing on nil.
type callSpan struct {
	span     trace.Span
	code     int
	sent     int
	received int
}

// spanName names the span of a call of hook.
func spanName(hook string) string {
	switch hook {
	case "sync":
		return "hook sync"
	case "finalize":
		return "hook finalize"
	case "customize":
		return "hook customize"
	}
	return "hook " + hook
}

// startSpan starts the span of a call, a child of ctx's (the sync's),
// when the Client has a Tracer, and returns ctx carrying it; the span is
// nil unless it records (an unsampled span still gives the call its own
// span id); retry is its metactl.hook.retry attribute
// (CallOptions.Retry). Without a Tracer, ctx is returned as it is.
func (c *Client) startSpan(ctx context.Context, controller, hook, url string, retry bool) (context.Context, *callSpan) {
	if c.tracer == nil {
		return ctx, nil
	}
	ctx, span := c.tracer.Start(ctx, spanName(hook), trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, nil
	}
	span.SetAttributes(AttrController.String(controller), AttrHook.String(hook), AttrRetry.Bool(retry),
		attribute.String("http.request.method", http.MethodPost), AttrURL.String(url))
	return ctx, &callSpan{span: span}
}

// injectTrace sets the traceparent (and tracestate, when there is one)
// header of a hook request from ctx's span context; from fresh ids when
// ctx has none, so that every request carries one.
func injectTrace(ctx context.Context, h http.Header) {
	traceContext.Inject(traceid.Ensure(ctx), propagation.HeaderCarrier(h))
}

func (s *callSpan) request(n int) {
	if s != nil {
		s.sent = n
	}
}

func (s *callSpan) answered(code int) {
	if s != nil {
		s.code = code
	}
}

func (s *callSpan) body(n int) {
	if s != nil {
		s.received = n
	}
}

// end ends the span with what the call did and its error.
func (s *callSpan) end(err error) {
	if s == nil {
		return
	}
	attrs := []attribute.KeyValue{AttrRequestBytes.Int(s.sent)}
	if s.code != 0 {
		attrs = append(attrs, AttrStatusCode.Int(s.code), AttrResponseBytes.Int(s.received))
	}
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		attrs = append(attrs, AttrRetryAfter.Float64(se.RetryAfter.Seconds()))
	}
	s.span.SetAttributes(attrs...)
	if err != nil {
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}
