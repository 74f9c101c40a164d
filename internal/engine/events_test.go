package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/hooks"
)

// drain returns the Events the fake recorder holds.
func (f *fixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestHookEventsOncePerSync: the Events of the answers of one sync's
// rounds are recorded once each, as the hook wrote them, after the
// rounds.
func TestHookEventsOncePerSync(t *testing.T) {
	f := newFixture(t, thing(), false, func(name string, request *fakeRequest) (*fakeResponse, error) {
		r, _ := countChildren(name, request)
		r.Events = []hooks.Event{{Type: "Normal", Reason: "Synced", Message: "all good"}}
		if len(request.Children["ConfigMap.v1"]) > 0 {
			r.Events = append(r.Events, hooks.Event{Type: "Warning", Reason: "ChildSeen", Message: "one child"})
		}
		return r, nil
	})
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if n := f.hooks.count(); n != 3 {
		t.Fatalf("%d hook calls, want 3", n)
	}
	want := []string{"Normal Synced all good", "Warning ChildSeen one child"}
	if got := f.drain(); !slices.Equal(got, want) {
		t.Errorf("Events %q, want %q", got, want)
	}
}

// TestNoHookEventsWhenCancelled: a sync cancelled after an accepted answer
// (its controller stops) records none of its Events.
func TestNoHookEventsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	f := newFixture(t, thing(), false, func(name string, request *fakeRequest) (*fakeResponse, error) {
		r, _ := countChildren(name, request)
		r.Events = []hooks.Event{{Type: "Normal", Reason: "Synced", Message: "all good"}}
		if len(request.Children["ConfigMap.v1"]) > 0 {
			cancel(errors.New("the controller stopped")) // the second call
		}
		return r, nil
	})
	if _, err := f.e.sync(ctx, &loop.Sync[Key]{Key: f.key()}); err == nil {
		t.Fatal("the cancelled sync succeeded")
	}
	if f.dependents.writes == 0 {
		t.Fatal("the first answer was not accepted: the test does not test its Events")
	}
	if got := f.drain(); len(got) != 0 {
		t.Errorf("the cancelled sync recorded %q", got)
	}
}

// TestHookEventsCannotUseMetactlReasons: every reason of the Events
// metactl records on the objects it syncs (the engine's, the child
// writer's) is one a hook's events may not use (hooks.CheckEvents); a
// reason of the hook's own is not.
func TestHookEventsCannotUseMetactlReasons(t *testing.T) {
	for _, reason := range []string{ReasonSyncError, ReasonHookNotSettled, ReasonUnknownAnswerField, ReasonStatusPruned,
		children.ReasonChildWriteWarning, children.ReasonChildNotUpdated, children.ReasonChildNameTaken, children.ReasonChildTerminating} {
		if !hooks.IsReservedEventReason(reason) {
			t.Errorf("metactl's Event reason %s is not reserved from hooks", reason)
		}
	}
	if hooks.IsReservedEventReason("BackupFailed") {
		t.Error("a hook's own reason BackupFailed is reserved")
	}
}
