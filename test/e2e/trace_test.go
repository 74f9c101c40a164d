package e2e

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/otlptest"
	"github.com/metactl/metactl/internal/testenv"
)

// TestTracePython runs metactl run with OTEL_EXPORTER_OTLP_ENDPOINT set to
// a receiver in the test, and the Python hello-world hook, which logs the
// trace id of each call's traceparent: the sync that creates the
// greeting's ConfigMap is exported with its hook call and write as
// children, and the hook logged that sync's trace id.
func TestTracePython(t *testing.T) {
	receiver := otlptest.NewReceiver(t)
	// The processes started below inherit these.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	ex := startExample(t, "python", "hello-world")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	waitFor(t, time.Minute, configmapsGVR, ns, "your-name-greeting", "greets World", func(o *unstructured.Unstructured) bool {
		return nestedString(o, "data", "greeting") == "Hello, World!"
	})

	var sync, hook, create *tracepb.Span
	var spans []*tracepb.Span
	testenv.Eventually(t, 30*time.Second, "the exported spans of the sync that created the ConfigMap", func(context.Context) (bool, error) {
		spans = receiver.Spans()
		sync, hook, create = nil, nil, nil
		for _, s := range spans {
			if s.Name == "create child" && otlptest.Attr(s, "metactl.write.name") == "your-name-greeting" && otlptest.Attr(s, "metactl.write.namespace") == ns {
				create = s
			}
		}
		if create == nil {
			return false, nil
		}
		for _, s := range spans {
			switch {
			case string(s.SpanId) == string(create.ParentSpanId) && string(s.TraceId) == string(create.TraceId):
				sync = s
			case s.Name == "hook sync" && string(s.TraceId) == string(create.TraceId):
				hook = s
			}
		}
		return sync != nil && hook != nil, nil
	})
	t.Logf("the sync that created the ConfigMap:\n%s", otlptest.Tree(sync, spans))
	if sync.Name != "sync compositecontroller/hello-world" || otlptest.Attr(sync, "metactl.parent") != "helloworlds.example.metactl.io/"+ns+"/your-name" {
		t.Errorf("the create's parent span is %q for %q, want the sync of helloworld %s/your-name", sync.Name, otlptest.Attr(sync, "metactl.parent"), ns)
	}
	if !otlptest.ChildOf(hook, sync) {
		t.Errorf("hook sync span is not a child of the sync's")
	}
	want := "sync call in trace " + hex.EncodeToString(sync.TraceId)
	testenv.Eventually(t, 10*time.Second, "the hook to log the sync's trace id", func(context.Context) (bool, error) {
		return strings.Contains(ex.hook.Output(), want), nil
	})
}
