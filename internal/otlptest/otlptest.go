// Package otlptest is an OTLP/HTTP trace receiver for tests, in the test's
// process: it decodes each ExportTraceServiceRequest (protobuf) sent to
// /v1/traces and keeps its spans, and prints span trees.
package otlptest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP trace receiver; its URL is what
// OTEL_EXPORTER_OTLP_ENDPOINT names.
type Receiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

// NewReceiver starts a Receiver, closed when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := Start()
	t.Cleanup(r.Close)
	return r
}

// Start starts a Receiver outside a test (the benchmark's); the caller
// closes it.
func Start() *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, "want POST /v1/traces", http.StatusBadRequest)
			return
		}
		var export coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &export); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	return r
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Take returns the spans received so far and forgets them.
func (r *Receiver) Take() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	spans := r.spans
	r.spans = nil
	return spans
}

// Attr returns the value of a span's attribute key as text ("" when
// absent); a string array as its values joined by ", ".
func Attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_DoubleValue:
			return fmt.Sprint(v.DoubleValue)
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			return strings.Join(parts, ", ")
		}
	}
	return ""
}

// ChildOf says whether s is a child of parent: same trace, parent's span
// as its parent.
func ChildOf(s, parent *tracepb.Span) bool {
	return string(s.TraceId) == string(parent.TraceId) && string(s.ParentSpanId) == string(parent.SpanId)
}

// Tree prints root and its descendants among spans, one a line, indented,
// with their durations and attributes.
func Tree(root *tracepb.Span, spans []*tracepb.Span) string {
	var b strings.Builder
	var walk func(s *tracepb.Span, depth int)
	walk = func(s *tracepb.Span, depth int) {
		var attrs []string
		for _, kv := range s.Attributes {
			attrs = append(attrs, kv.Key+"="+Attr(s, kv.Key))
		}
		dur := time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano)
		fmt.Fprintf(&b, "%s%s  %v  %s\n", strings.Repeat("  ", depth), s.Name, dur.Round(10*time.Microsecond), strings.Join(attrs, " "))
		for _, c := range spans {
			if ChildOf(c, s) {
				walk(c, depth+1)
			}
		}
	}
	fmt.Fprintf(&b, "trace %s\n", hex.EncodeToString(root.TraceId))
	walk(root, 0)
	return b.String()
}
