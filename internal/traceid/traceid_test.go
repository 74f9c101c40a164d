package traceid

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestNewIsValidAndFresh(t *testing.T) {
	a, b := New(), New()
	if !a.IsValid() || !a.IsSampled() || a.TraceID() == b.TraceID() || a.SpanID() == b.SpanID() {
		t.Errorf("New gave %v and %v: want two valid, sampled, distinct", a, b)
	}
	ctx := trace.ContextWithSpanContext(context.Background(), a)
	if Ensure(ctx) != ctx {
		t.Error("Ensure replaced a valid span context")
	}
	if !trace.SpanContextFromContext(Ensure(context.Background())).IsValid() {
		t.Error("Ensure left a context without a span context")
	}
}

// BenchmarkSyncWithoutExport is what a sync and one hook call pay with
// export off: the sync's ids, and the header written.
func BenchmarkSyncWithoutExport(b *testing.B) {
	b.ReportAllocs()
	h := http.Header{}
	for b.Loop() {
		ctx := trace.ContextWithSpanContext(context.Background(), New())
		propagation.TraceContext{}.Inject(Ensure(ctx), propagation.HeaderCarrier(h))
	}
}
