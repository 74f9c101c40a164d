package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/pkg/hooks"
)

// hookEvents are the Events that the answers one sync accepted asked for
// (an answer's "events", checked whole with the rest of it by
// hooks.CheckEvents), in the order asked, each (type, reason, message)
// once: a hook called again in the rounds of a sync that repeats an Event
// gets it recorded once.
type hookEvents struct {
	list []hooks.Event
	seen map[hooks.Event]bool
}

// add adds the Events of an accepted answer.
func (h *hookEvents) add(events []hooks.Event) {
	for _, ev := range events {
		if h.seen[ev] {
			continue
		}
		if h.seen == nil {
			h.seen = map[hooks.Event]bool{}
		}
		h.seen[ev] = true
		h.list = append(h.list, ev)
	}
}

// recordHookEvents records the Events of the accepted answers of a sync on
// obj, through the controller's recorder (rate limited as metactl's own
// Events are), with the hook's type, reason and message as they are.
// Nothing is recorded once ctx is done: a sync cancelled because its
// controller stops or restarts tells nothing more.
func (e *Engine) recordHookEvents(ctx context.Context, obj runtime.Object, events *hookEvents) {
	if len(events.list) == 0 || ctx.Err() != nil {
		return
	}
	for _, ev := range events.list {
		e.opts.Recorder.Event(obj, ev.Type, ev.Reason, ev.Message)
	}
	klog.FromContext(ctx).V(4).Info("Recorded the hook's Events", "events", len(events.list))
}
