package history

import (
	"context"
	"sync"
	"time"

	"github.com/metactl/metactl/internal/loop"
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
	// first first.
	Triggers []loop.Trigger `json:"triggers"`
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
	// a retry, resyncAfterSeconds or the resync period; zero when none is
	// scheduled.
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
}

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
	s.mu.Lock()
	s.Calls = append(s.Calls, c)
	s.mu.Unlock()
}

// AddWrite records a write.
func (s *Sync) AddWrite(w Write) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.Writes = append(s.Writes, w)
	s.mu.Unlock()
}
