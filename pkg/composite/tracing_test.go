package composite_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver in the test's process: it
// decodes each ExportTraceServiceRequest (protobuf) and keeps its spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if req.URL.Path != "/v1/traces" || err != nil {
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
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// spanAttr returns the value of a span's attribute key as text ("" when
// absent); a string array as its values joined by ", ".
func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
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

// spanTree prints root and its descendants among spans, one a line,
// indented, with their attributes.
func spanTree(root *tracepb.Span, spans []*tracepb.Span) string {
	var b strings.Builder
	var walk func(s *tracepb.Span, depth int)
	walk = func(s *tracepb.Span, depth int) {
		var attrs []string
		for _, kv := range s.Attributes {
			attrs = append(attrs, kv.Key+"="+spanAttr(s, kv.Key))
		}
		dur := time.Duration(s.EndTimeUnixNano - s.StartTimeUnixNano)
		fmt.Fprintf(&b, "%s%s  [%s] %s\n", strings.Repeat("  ", depth), s.Name, dur.Round(10*time.Microsecond), strings.Join(attrs, " "))
		for _, c := range spans {
			if string(c.ParentSpanId) == string(s.SpanId) && string(c.TraceId) == string(s.TraceId) {
				walk(c, depth+1)
			}
		}
	}
	fmt.Fprintf(&b, "trace %s\n", hex.EncodeToString(root.TraceId))
	walk(root, 0)
	return b.String()
}

// TestTracingExportsLinkedSpans runs a controller with a customize and a
// sync hook, exporting over OTLP (the standard environment variables) to
// a receiver in the test: the sync's span has the hook calls and writes as
// children, and each hook saw its own span in its traceparent header.
func TestTracingExportsLinkedSpans(t *testing.T) {
	receiver := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	traces, err := tracing.New(ctx(t), tracing.Options{ServiceVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !traces.Enabled() {
		t.Fatal("tracing off with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	t.Cleanup(func() { _ = traces.Shutdown(context.Background()) })

	ns := env.CreateNamespace(t)
	var mu sync.Mutex
	traceparents := map[string][]string{} // by hook path
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		traceparents[r.URL.Path] = append(traceparents[r.URL.Path], r.Header.Get("traceparent"))
		mu.Unlock()
		if r.URL.Path == "/customize" {
			_ = json.NewEncoder(w).Encode(map[string]any{"relatedResources": []any{}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": map[string]any{"ok": true},
			"children": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": req.Parent.GetName() + "-cm", "labels": map[string]any{"parent": req.Parent.GetName()}}, "data": map[string]any{"k": "v"}}},
		})
	}))
	t.Cleanup(hook.Close)
	cc := compositeController(t, &testHook{server: hook}, thingsGVR, func(spec map[string]any) {
		spec["hooks"] = map[string]any{
			"sync":      map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}},
			"customize": map[string]any{"webhook": map[string]any{"url": hook.URL + "/customize"}},
		}
	})
	startController(t, cc, func(o *composite.Options) {
		o.Hooks = hooks.NewClient(hooks.Options{Tracer: traces.Tracer()})
		o.Tracer = traces.Tracer()
	})
	newThing(t, thingsGVR, ns, "traced", nil)

	// The sync that created the child, once its spans are all exported.
	var sync, hookSync, hookCustomize, create, status *tracepb.Span
	var spans []*tracepb.Span
	testenv.Eventually(t, 30*time.Second, "the spans of the sync that created the child", func(context.Context) (bool, error) {
		spans = receiver.all()
		for _, s := range spans {
			if s.Name == "create child" && spanAttr(s, "metactl.write.name") == "traced-cm" {
				create = s
			}
		}
		if create == nil {
			return false, nil
		}
		sync, hookSync, hookCustomize, status = nil, nil, nil, nil
		for _, s := range spans {
			if string(s.TraceId) != string(create.TraceId) {
				continue
			}
			switch {
			case string(s.SpanId) == string(create.ParentSpanId):
				sync = s
			case s.Name == "hook sync":
				hookSync = s
			case s.Name == "hook customize":
				hookCustomize = s
			case s.Name == "patch status":
				status = s
			}
		}
		return sync != nil && hookSync != nil && hookCustomize != nil && status != nil, nil
	})
	t.Logf("the span tree of the sync that created the child:\n%s", spanTree(sync, spans))

	if want := "sync compositecontroller/" + cc.GetName(); sync.Name != want || len(sync.ParentSpanId) != 0 {
		t.Errorf("sync span %q with parent %x, want %q, a root", sync.Name, sync.ParentSpanId, want)
	}
	for key, want := range map[string]string{
		"metactl.controller": cc.GetName(), "metactl.controller.kind": "CompositeController",
		"metactl.parent": "things.test.metactl.io/" + ns + "/traced", "metactl.sync.result": "success",
	} {
		if got := spanAttr(sync, key); got != want {
			t.Errorf("sync span %s = %q, want %q", key, got, want)
		}
	}
	if got := spanAttr(sync, "metactl.triggers"); !strings.Contains(got, "object") && !strings.Contains(got, "start") {
		t.Errorf("sync span metactl.triggers = %q, want the object's change or the start", got)
	}
	for _, s := range []*tracepb.Span{hookSync, hookCustomize, create, status} {
		if string(s.ParentSpanId) != string(sync.SpanId) {
			t.Errorf("span %q has parent %x, want the sync's %x", s.Name, s.ParentSpanId, sync.SpanId)
		}
	}
	if got := spanAttr(hookSync, "http.response.status_code"); got != "200" {
		t.Errorf("hook sync span status code %q, want 200", got)
	}
	if spanAttr(hookSync, "http.request.body.size") == "" || spanAttr(hookSync, "http.response.body.size") == "" || spanAttr(hookSync, "metactl.hook.retry") != "false" {
		t.Errorf("hook sync span lacks bytes or retry: %v", hookSync.Attributes)
	}
	for key, want := range map[string]string{"metactl.write.verb": "create", "metactl.write.resource": "configmaps",
		"metactl.write.namespace": ns, "metactl.write.result": "success"} {
		if got := spanAttr(create, key); got != want {
			t.Errorf("create child span %s = %q, want %q", key, got, want)
		}
	}
	// Each hook saw its call's span in traceparent: same trace, the call's
	// span as parent.
	mu.Lock()
	defer mu.Unlock()
	for path, s := range map[string]*tracepb.Span{"/sync": hookSync, "/customize": hookCustomize} {
		want := "00-" + hex.EncodeToString(s.TraceId) + "-" + hex.EncodeToString(s.SpanId) + "-01"
		if !slices.Contains(traceparents[path], want) {
			t.Errorf("%s hook got traceparent %q, want one %q", path, traceparents[path], want)
		}
	}
}
