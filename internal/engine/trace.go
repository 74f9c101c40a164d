package engine

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/traceid"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// The attributes of a sync's span (docs/tracing.md).
const (
	AttrControllerKind  = attribute.Key("metactl.controller.kind")
	AttrParent          = attribute.Key("metactl.parent")
	AttrTriggers        = attribute.Key("metactl.triggers")
	AttrTriggersDropped = attribute.Key("metactl.triggers.dropped")
	AttrResult          = attribute.Key("metactl.sync.result")
	AttrReason          = attribute.Key("metactl.sync.reason")
)

// resultGone is the sync span's result when the sync found its object
// gone (the record of syncs keeps none then).
const resultGone = "gone"

// beginTrace starts the span of a sync, into ctx: with Options.Tracer, a
// root span named "sync <kind>/<controller>"; without, only fresh trace
// and span ids for the hook requests' traceparent, nothing recorded. The
// hook calls (pkg/hooks/hookclient) and the writes (history.Failed) of the sync are
// its children; those of a retry are marked so (retried).
func (e *Engine) beginTrace(ctx context.Context, s *loop.Sync[Key]) context.Context {
	if e.opts.Tracer == nil {
		return trace.ContextWithSpanContext(ctx, traceid.New())
	}
	ctx, _ = e.opts.Tracer.Start(ctx, "sync "+e.kindName+"/"+e.name)
	return ctx
}

// retried reports whether the hook calls of the work queue's sync s, whose
// span beginTrace started in ctx, are marked as retries
// (hookclient.CallOptions.Retry): when the span records and s retries (a
// trigger of s is a retry).
func (e *Engine) retried(ctx context.Context, s *loop.Sync[Key]) bool {
	return trace.SpanFromContext(ctx).IsRecording() &&
		slices.ContainsFunc(s.Triggers(), func(t trigger.Trigger) bool { return t.Cause == trigger.CauseRetry })
}

// endTrace ends the span of the work queue's sync s that beginTrace
// started in ctx, with its attributes: the controller, the object, the
// triggers, the result (resultOf; "gone" when the object was) and the
// reason of the metactl.io/Synced condition it leads to.
func (e *Engine) endTrace(ctx context.Context, s *loop.Sync[Key], gone bool, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	triggers := s.Triggers()
	causes := make([]string, len(triggers))
	for i, t := range triggers {
		causes[i] = t.String()
	}
	result := resultOf(ctx, err)
	if gone {
		result = resultGone
	}
	attrs := []attribute.KeyValue{
		hookclient.AttrController.String(e.name), AttrControllerKind.String(e.cfg.Kind),
		AttrParent.String(e.describeKey(s.Key)), AttrTriggers.StringSlice(causes),
		AttrResult.String(result), AttrReason.String(syncReason(err)),
	}
	if n := s.TriggersDropped(); n > 0 {
		attrs = append(attrs, AttrTriggersDropped.Int(n))
	}
	span.SetAttributes(attrs...)
	if err != nil && !gone {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// describeKey names the object queued as key as the sync's record names
// objects (trigger.ObjectName): resource/namespace/name.
func (e *Engine) describeKey(key Key) string {
	return trigger.ObjectName(key.Resource.GroupVersionResource().GroupResource().String(), key.Namespace, key.Name)
}
