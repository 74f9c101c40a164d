// Package traceid gives a context a W3C trace context of its own when it
// has none, cheaply, for hook requests to carry when metactl exports no
// spans (see internal/tracing): fresh random trace and span ids, no span
// recorded.
package traceid

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// New returns a span context with a fresh random trace id and span id,
// flagged sampled: metactl records nothing of it, but a hook that traces
// records its own spans under it as it would without a parent (a hook
// whose sampler follows its parent would otherwise drop them all).
func New() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

// Ensure returns ctx when it carries a valid span context, else ctx
// carrying New().
func Ensure(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, New())
}
