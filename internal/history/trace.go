package history

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/tracing"
)

// The attributes of a write's span (docs/tracing.md).
const (
	AttrWriteVerb      = attribute.Key("metactl.write.verb")
	AttrWriteTarget    = attribute.Key("metactl.write.target")
	AttrWriteResource  = attribute.Key("metactl.write.resource")
	AttrWriteNamespace = attribute.Key("metactl.write.namespace")
	AttrWriteName      = attribute.Key("metactl.write.name")
	AttrWriteResult    = attribute.Key("metactl.write.result")
)

// traceWrite adds the span of a write, a child of the span of ctx (the
// sync's), when that span records; it costs one ctx.Value otherwise. The
// write is over when it is recorded, so its span marks the moment its
// answer came (its start is not known here): name "verb target"
// ("create child"), attributes the object (trigger.ObjectName's parts) and
// the result, "success" or the API status reason of the error
// ("Conflict"; "error" when it has none).
func traceWrite(ctx context.Context, verb, target, object string, err error) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return
	}
	_, span := parent.TracerProvider().Tracer(tracing.ScopeName).Start(ctx, verb+" "+target, trace.WithSpanKind(trace.SpanKindClient))
	resource, namespace, name := splitObject(object)
	result := "success"
	if err != nil {
		result = "error"
		if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
			result = string(reason)
		}
		span.SetStatus(codes.Error, Cut(err.Error()))
	}
	span.SetAttributes(AttrWriteVerb.String(verb), AttrWriteTarget.String(target),
		AttrWriteResource.String(resource), AttrWriteNamespace.String(namespace), AttrWriteName.String(name),
		AttrWriteResult.String(result))
	span.End()
}

// splitObject splits an object named as trigger.ObjectName names it.
func splitObject(object string) (resource, namespace, name string) {
	resource, rest, _ := strings.Cut(object, "/")
	if ns, n, ok := strings.Cut(rest, "/"); ok {
		return resource, ns, n
	}
	return resource, "", rest
}
