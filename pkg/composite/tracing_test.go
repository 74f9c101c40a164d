//go:build integration

package composite_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/otlptest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/internal/tracing"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestTracingExportsLinkedSpans runs a controller with a customize and a
// sync hook, exporting over OTLP (the standard environment variables) to
// a receiver in the test: the sync's span has the hook calls and writes as
// children, and each hook saw its own span in its traceparent header.
func TestTracingExportsLinkedSpans(t *testing.T) {
	receiver := otlptest.NewReceiver(t)
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
		o.Hooks = hookclient.NewClient(hookclient.Options{Tracer: traces.Tracer()})
		o.Tracer = traces.Tracer()
	})
	newThing(t, thingsGVR, ns, "traced", nil)

	// The sync that created the child, once its spans are all exported.
	var sync, hookSync, hookCustomize, create, status *tracepb.Span
	var spans []*tracepb.Span
	testenv.Eventually(t, 30*time.Second, "the spans of the sync that created the child", func(context.Context) (bool, error) {
		spans = receiver.Spans()
		for _, s := range spans {
			if s.Name == "create child" && otlptest.Attr(s, "metactl.write.name") == "traced-cm" {
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
	t.Logf("the span tree of the sync that created the child:\n%s", otlptest.Tree(sync, spans))

	if want := "sync compositecontroller/" + cc.GetName(); sync.Name != want || len(sync.ParentSpanId) != 0 {
		t.Errorf("sync span %q with parent %x, want %q, a root", sync.Name, sync.ParentSpanId, want)
	}
	for key, want := range map[string]string{
		"metactl.controller": cc.GetName(), "metactl.controller.kind": "CompositeController",
		"metactl.parent": "things.test.metactl.io/" + ns + "/traced", "metactl.sync.result": "success",
	} {
		if got := otlptest.Attr(sync, key); got != want {
			t.Errorf("sync span %s = %q, want %q", key, got, want)
		}
	}
	if got := otlptest.Attr(sync, "metactl.triggers"); !strings.Contains(got, "object") && !strings.Contains(got, "start") {
		t.Errorf("sync span metactl.triggers = %q, want the object's change or the start", got)
	}
	for _, s := range []*tracepb.Span{hookSync, hookCustomize, create, status} {
		if !otlptest.ChildOf(s, sync) {
			t.Errorf("span %q has parent %x, want the sync's %x", s.Name, s.ParentSpanId, sync.SpanId)
		}
	}
	if got := otlptest.Attr(hookSync, "http.response.status_code"); got != "200" {
		t.Errorf("hook sync span status code %q, want 200", got)
	}
	if otlptest.Attr(hookSync, "http.request.body.size") == "" || otlptest.Attr(hookSync, "http.response.body.size") == "" || otlptest.Attr(hookSync, "metactl.hook.retry") != "false" {
		t.Errorf("hook sync span lacks bytes or retry: %v", hookSync.Attributes)
	}
	for key, want := range map[string]string{"metactl.write.verb": "create", "metactl.write.resource": "configmaps",
		"metactl.write.namespace": ns, "metactl.write.result": "success"} {
		if got := otlptest.Attr(create, key); got != want {
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
