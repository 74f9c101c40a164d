package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/loop"
)

// TestStopCancelsSyncs stops a loop while a sync waits on its context:
// the context is cancelled with loop.ErrStopped, Stop returns once the
// sync does, and the cancelled sync is neither logged as a failure nor
// retried.
func TestStopCancelsSyncs(t *testing.T) {
	entered := make(chan struct{})
	cause := make(chan error, 1)
	l, logs := start(t, loop.Options{StopGracePeriod: time.Minute}, func(ctx context.Context, key string) (time.Duration, error) {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return 0, ctx.Err()
	})
	l.AddFor("a", changed)
	<-entered
	began := time.Now()
	l.Stop()
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("Stop took %v: the sync was not cancelled", d)
	}
	if err := <-cause; !errors.Is(err, loop.ErrStopped) {
		t.Errorf("the sync's context was cancelled with %v, want loop.ErrStopped", err)
	}
	if strings.Contains(logs.String(), "Sync failed") {
		t.Errorf("a cancelled sync was logged as failed:\n%s", logs.String())
	}
}

// TestStopAbandonsSyncsAfterTheGracePeriod stops a loop whose sync ignores
// its context: Stop returns after the grace period and logs the key.
func TestStopAbandonsSyncsAfterTheGracePeriod(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	l, logs := start(t, loop.Options{StopGracePeriod: 300 * time.Millisecond}, func(ctx context.Context, key string) (time.Duration, error) {
		close(entered)
		<-release
		return 0, nil
	})
	l.AddFor("stuck", changed)
	<-entered
	began := time.Now()
	l.Stop()
	if d := time.Since(began); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("Stop returned after %v, want the grace period of 300ms", d)
	}
	if !strings.Contains(logs.String(), "abandoning") || !strings.Contains(logs.String(), "stuck") {
		t.Errorf("the abandoned sync is not logged:\n%s", logs.String())
	}
}
