package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/metactl/metactl/internal/loop"
)

// TestCancelledSyncWritesNothing cancels a sync's context while its hook
// call runs, and the hook answers anyway (its answer raced the
// cancellation): the sync returns the cancellation's cause, writes no
// child, no status, no metadata, and records no SyncError Event.
func TestCancelledSyncWritesNothing(t *testing.T) {
	stopped := errors.New("the controller stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	f := newFixture(t, thing(), false, func(name string, request *fakeRequest) (*fakeResponse, error) {
		cancel(stopped)
		return countChildren(name, request)
	})
	_, err := f.e.sync(ctx, &loop.Sync[Key]{Key: f.key()})
	if !errors.Is(err, stopped) {
		t.Fatalf("sync returned %v, want the cancellation's cause", err)
	}
	if f.dependents.manages != 0 || len(f.objects.patches) != 0 {
		t.Errorf("the cancelled sync wrote: %d child writes, patches %v", f.dependents.manages, f.objects.patches)
	}
	select {
	case e := <-f.recorder.Events:
		t.Errorf("the cancelled sync recorded an Event: %s", e)
	default:
	}
}
