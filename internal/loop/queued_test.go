package loop_test

import (
	"context"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
)

// TestQueuedSince: a key waiting for a worker (the one worker is busy) is
// queued since it was added; once its sync has begun it is not, and a key
// queued only after a delay is not queued before it.
func TestQueuedSince(t *testing.T) {
	started := make(chan string, 2)
	release := make(chan struct{})
	l := loop.New(loop.Options[string]{Name: t.Name(), Workers: 1}, func(ctx context.Context, s *loop.Sync[string]) (time.Duration, error) {
		started <- s.Key
		<-release
		return 0, nil
	})
	l.Start(context.Background())
	t.Cleanup(l.Stop)
	t.Cleanup(func() { close(release) })
	l.AddFor("a", trigger.Trigger{Cause: trigger.CauseObject})
	if got := <-started; got != "a" {
		t.Fatalf("first sync %q, want a", got)
	}
	before := time.Now()
	l.AddFor("b", trigger.Trigger{Cause: trigger.CauseObject})
	l.AddAfterFor("c", time.Hour, trigger.Trigger{Cause: trigger.CauseResync})
	if q := l.QueuedSince("b"); q.IsZero() || q.Before(before.Add(-time.Second)) {
		t.Errorf("QueuedSince(b) = %v while the worker is busy, want about %v", q, before)
	}
	if q := l.QueuedSince("c"); !q.IsZero() {
		t.Errorf("QueuedSince(c) = %v for a key due in an hour, want zero", q)
	}
	if q := l.QueuedSince("a"); !q.IsZero() {
		t.Errorf("QueuedSince(a) = %v while it is synced, want zero", q)
	}
}
