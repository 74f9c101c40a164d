package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// History returns the recorded syncs of the object whose queue key's text
// (Key.String) is key, newest first; nil when none is kept (or
// Options.History is nil).
func (e *Engine) History(key string) []*history.Sync {
	return e.opts.History.Get(e.historyID(), key)
}

// historyID names the controller in the Store: kinds may share names.
func (e *Engine) historyID() string { return history.ControllerID(e.kindName, e.name) }

// beginRecord starts the record of the work queue's sync s, with its
// triggers, into ctx (history.With), and its span (beginTrace); without a
// Store no record is allocated.
func (e *Engine) beginRecord(ctx context.Context, s *loop.Sync[Key]) context.Context {
	ctx = e.beginTrace(ctx, s)
	if e.opts.History == nil {
		return ctx
	}
	return history.With(ctx, &history.Sync{
		Start:           time.Now(),
		Triggers:        s.Triggers(),
		TriggersDropped: s.TriggersDropped(),
	})
}

// endRecord ends the record of the work queue's sync s that returned after
// and err with its outcome and keeps it, unless the sync found the object
// gone: its record is forgotten then, and so are the retries and resyncs
// the work queue holds for it. It ends the sync's span too (endTrace).
func (e *Engine) endRecord(ctx context.Context, s *loop.Sync[Key], gone bool, after time.Duration, err error) {
	key := s.Key
	e.endTrace(ctx, s, gone, err)
	if gone {
		s.Gone()
		e.opts.History.Forget(e.historyID(), key.String())
		return
	}
	rec := history.From(ctx)
	if rec == nil {
		return
	}
	end := time.Now()
	rec.Duration = end.Sub(rec.Start)
	o := history.Outcome{Result: resultOf(ctx, err), Reason: syncReason(err)}
	switch o.Result {
	case history.ResultSuccess:
		if after > 0 {
			o.NextAttempt = end.Add(after)
		}
		o.NextAttempt = sooner(o.NextAttempt, s.NextDelayed(false))
	case history.ResultCancelled:
		o.Reason, o.Error = "", history.Cut(err.Error())
	default:
		o.Error = history.Cut(err.Error())
		if delay, attempt, ok := s.Retry(err); ok {
			o.Attempt, o.NextAttempt = attempt, end.Add(delay)
		}
		// A sooner resyncAfterSeconds of an unsettled hook, or a retry
		// pending from before.
		o.NextAttempt = sooner(o.NextAttempt, s.NextDelayed(true))
	}
	rec.Outcome = o
	e.opts.History.Put(e.historyID(), key.String(), rec)
}

// resultOf is how a sync under ctx that returned err ended
// (history.Outcome.Result): success, cancelled (ctx is: the controller
// stopped), waiting (loop.ErrWaiting) or error.
func resultOf(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return history.ResultSuccess
	case ctx.Err() != nil:
		return history.ResultCancelled
	case errors.Is(err, loop.ErrWaiting):
		return history.ResultWaiting
	}
	return history.ResultError
}

// sooner returns the sooner of a and b, a zero time counting as none.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// resyncAfter queues key after delay for the hook's resyncAfterSeconds.
func (e *Engine) resyncAfter(key Key, delay time.Duration) {
	e.queue.AddAfterFor(key, delay, trigger.Trigger{Cause: trigger.CauseResyncAfter})
}

// Name names t's object in the sync's record (trigger.ObjectName).
func (t *Target) Name() string {
	return trigger.ObjectName(t.Resource.GroupVersionResource().GroupResource().String(), t.Object.GetNamespace(), t.Object.GetName())
}

// recordCall records a hook call in the sync's record (history.From(ctx)).
func recordCall(ctx context.Context, name string, start time.Time, err error) {
	s := history.From(ctx)
	if s == nil {
		return
	}
	c := history.Call{Hook: name, Start: start, Duration: time.Since(start), Result: "200"}
	if err != nil {
		c.Error = err.Error()
		var status *hookclient.StatusError
		var events *hooks.EventsError
		var invalid *hookclient.ResponseError
		switch {
		case errors.As(err, &status):
			c.Result = strconv.Itoa(status.Code)
		case errors.As(err, &events):
			// Answered 200, with events that metactl's checks refused:
			// the hook's answer was refused, not its call failed.
			c.Error = name + " hook answer refused: " + events.Error()
		case errors.As(err, &invalid):
			// Answered 200 with an invalid body.
		default:
			c.Result = "error"
		}
	}
	s.AddCall(c)
}
