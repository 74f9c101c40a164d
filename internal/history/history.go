package history

import (
	"context"
	"sync"
	"time"
	"unsafe"

	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/textcut"
	"github.com/metactl/metactl/internal/trigger"
)

// Sync is the record of one sync of one object. The methods that add to
// it are safe for concurrent use (a sync writes its dependents
// concurrently) and do nothing on a nil *Sync, so that code outside a
// recorded sync needs no check.
type Sync struct {
	// Start is when the sync began; Duration how long it took.
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"`
	// Triggers are the causes that queued the key since its last sync,
	// first first (at most loop.MaxTriggers).
	Triggers []trigger.Trigger `json:"triggers"`
	// TriggersDropped counts the distinct triggers beyond
	// loop.MaxTriggers, not listed.
	TriggersDropped int `json:"triggersDropped,omitempty"`
	// Calls are the hook calls, in the order they were made.
	Calls []Call `json:"calls,omitempty"`
	// Writes are the writes to the API server, in the order they ended.
	Writes []Write `json:"writes,omitempty"`
	// Outcome is how the sync ended.
	Outcome Outcome `json:"outcome"`

	mu sync.Mutex
}

// Call is one hook call.
type Call struct {
	// Hook is "sync", "finalize" or "customize".
	Hook     string        `json:"hook"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"`
	// Result is the HTTP code ("200"), or "error" when no answer came.
	Result string `json:"result"`
	// Error is the call's error, empty on success.
	Error string `json:"error,omitempty"`
}

// Write is one write to the API server.
type Write struct {
	// Verb is "create", "update", "patch" or "delete"; Target what was
	// written: "child", "status", "metadata", "finalizer", "ownership",
	// "revision".
	Verb   string `json:"verb"`
	Target string `json:"target"`
	// Object names the object written: resource/namespace/name (or
	// resource/name).
	Object string `json:"object"`
	// Error is the write's error, empty on success.
	Error string `json:"error,omitempty"`
}

// The results of a sync (Outcome.Result).
const (
	ResultSuccess   = "success"
	ResultError     = "error"
	ResultWaiting   = "waiting"
	ResultCancelled = "cancelled"
)

// Outcome is how a sync ended and what follows.
type Outcome struct {
	// Result is "success", "error", "waiting" (the hook has not settled, or
	// something it needs is not there yet) or "cancelled" (the controller
	// stopped).
	Result string `json:"result"`
	// Reason is the reason of the metactl.io/Synced condition it leads to
	// (Synced, HookFailed, InvalidAnswer, WriteFailed, Waiting, ...).
	Reason string `json:"reason,omitempty"`
	// Error is the sync's error, empty on success.
	Error string `json:"error,omitempty"`
	// Attempt is how many syncs in a row have failed (or waited), this one
	// included; 0 after a success.
	Attempt int `json:"attempt,omitempty"`
	// NextAttempt is when the object is synced again without a new event:
	// the soonest of its retry and the hook's resyncAfterSeconds (an
	// unsettled hook's too); zero when none is scheduled. The resync
	// period is not counted: it syncs every object at once, on a timer of
	// the controller's.
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
}

// syncKey is the context key of a sync's record. The record travels in
// the context, not in a parameter, because writes reach it through
// callbacks that carry only the write's context: pkg/dynamic's writers
// (children.Writer, ownership.Claimer) tell their OnWrite func of each
// write without knowing of records, and writes of many packages feed one
// record per sync.
type syncKey struct{}

// With returns ctx carrying s, for From.
func With(ctx context.Context, s *Sync) context.Context {
	return context.WithValue(ctx, syncKey{}, s)
}

// From returns the Sync ctx carries, nil when none.
func From(ctx context.Context) *Sync {
	s, _ := ctx.Value(syncKey{}).(*Sync)
	return s
}

// AddCall records a hook call.
func (s *Sync) AddCall(c Call) {
	if s == nil {
		return
	}
	c.Error = Cut(c.Error)
	s.mu.Lock()
	s.Calls = append(s.Calls, c)
	s.mu.Unlock()
}

// AddWrite records a write.
func (s *Sync) AddWrite(w Write) {
	if s == nil {
		return
	}
	w.Error = Cut(w.Error)
	s.mu.Lock()
	s.Writes = append(s.Writes, w)
	s.mu.Unlock()
}

// MaxErrorBytes bounds each error text a Sync keeps (Cut).
const MaxErrorBytes = 1024

// Cut returns s cut to MaxErrorBytes, at a character boundary, marked
// with "..." when cut.
func Cut(s string) string { return textcut.Cut(s, MaxErrorBytes) }

// The sizes of the records' fixed parts.
var (
	syncSize    = int64(unsafe.Sizeof(Sync{}))
	triggerSize = int64(unsafe.Sizeof(trigger.Trigger{}))
	callSize    = int64(unsafe.Sizeof(Call{}))
	writeSize   = int64(unsafe.Sizeof(Write{}))
)

// alloc estimates the heap taken by an allocation of n bytes: rounded up
// to 16 bytes, plus an eighth for the size classes of Go's allocator
// (whose rounding wastes at most that much).
func alloc(n int) int64 {
	if n == 0 {
		return 0
	}
	a := int64(n+15) &^ 15
	return a + a/8
}

// Size estimates the memory s holds: its fixed parts, the capacity of its
// slices and the bytes of its strings, each as an allocation (an upper
// bound: strings it shares with others, such as the hook names, count as
// its own).
func (s *Sync) Size() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := alloc(int(syncSize))
	n += alloc(cap(s.Triggers) * int(triggerSize))
	for _, t := range s.Triggers {
		n += alloc(len(t.Object)) + alloc(len(t.Cause))
	}
	n += alloc(cap(s.Calls) * int(callSize))
	for _, c := range s.Calls {
		n += alloc(len(c.Hook)) + alloc(len(c.Result)) + alloc(len(c.Error))
	}
	n += alloc(cap(s.Writes) * int(writeSize))
	for _, w := range s.Writes {
		n += alloc(len(w.Verb)) + alloc(len(w.Target)) + alloc(len(w.Object)) + alloc(len(w.Error))
	}
	o := s.Outcome
	n += alloc(len(o.Result)) + alloc(len(o.Reason)) + alloc(len(o.Error))
	return n
}

// Wrote counts a write of controller in metactl_object_writes_total (by
// verb and target) and records it in the sync's record (From(ctx)), with
// the object written (trigger.ObjectName) and the write's error: every write
// that counts goes through it, after the request, so that the metric and
// the record agree. controller "" counts nothing (a write counted by its
// caller).
func Wrote(ctx context.Context, controller, verb, target, object string, err error) {
	if controller != "" {
		metrics.ObjectWrites.WithLabelValues(controller, verb, target).Inc()
	}
	Failed(ctx, verb, target, object, err)
}

// A WriteFunc is told of a write after its request: its verb and target
// (the labels of metactl_object_writes_total), the object written
// (trigger.ObjectName) and the write's error. pkg/dynamic's writers call
// one without knowing what it does with the write.
type WriteFunc func(ctx context.Context, verb, target, object string, err error)

// WritesOf returns the WriteFunc that passes each write of controller to
// Wrote: counted in metactl_object_writes_total and recorded in the sync's
// record.
func WritesOf(controller string) WriteFunc {
	return func(ctx context.Context, verb, target, object string, err error) {
		Wrote(ctx, controller, verb, target, object, err)
	}
}

// Failed records a write in the sync's record without counting it: a
// write that failed where only successful writes are counted. It also
// adds the write's span to the sync's trace, when the sync's span records
// (docs/tracing.md).
func Failed(ctx context.Context, verb, target, object string, err error) {
	traceWrite(ctx, verb, target, object, err)
	s := From(ctx)
	if s == nil {
		return
	}
	w := Write{Verb: verb, Target: target, Object: object}
	if err != nil {
		w.Error = err.Error()
	}
	s.AddWrite(w)
}
