package manager

import (
	"errors"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/engine"
)

// TestFailingStatusIsThrottled: what a running controller's status shows
// of its failing objects, step by step on a fake clock (failingStatus):
// a change is shown at once when nothing changed on the status for
// FailingStatusInterval, else the status keeps what it showed until the
// interval has passed, and says how long that is; no change, no wait.
func TestFailingStatusIsThrottled(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	current := &engine.Failing{}
	f := &failingStatus{}
	for _, step := range []struct {
		name             string
		at               time.Duration
		fail, succeed    []string
		shown            int // failing objects the status shows
		wait             time.Duration
		waitBeforeChange time.Duration // f.wait at this time, before the step's change is shown
	}{
		{name: "none failing", at: 0, shown: 0},
		{name: "the first failure is shown at once", at: time.Second, fail: []string{"a"}, shown: 1},
		{name: "a second, 2 s later, waits 3 s", at: 3 * time.Second, fail: []string{"b"}, shown: 1, wait: 3 * time.Second, waitBeforeChange: 3 * time.Second},
		{name: "still waiting, 1 s later", at: 4 * time.Second, shown: 1, wait: 2 * time.Second, waitBeforeChange: 2 * time.Second},
		{name: "shown once the interval has passed", at: 6 * time.Second, shown: 2},
		{name: "recovery right after waits too", at: 7 * time.Second, succeed: []string{"a", "b"}, shown: 2, wait: 4 * time.Second, waitBeforeChange: 4 * time.Second},
		{name: "and is shown after", at: 11 * time.Second, shown: 0},
		{name: "no change: nothing to wait for, though a change would", at: 12 * time.Second, shown: 0, waitBeforeChange: 4 * time.Second},
	} {
		now := base.Add(step.at)
		for _, key := range step.fail {
			current.Failed(engine.Key{Name: key}, errors.New("hook failed"))
		}
		for _, key := range step.succeed {
			current.Succeeded(engine.Key{Name: key})
		}
		if got := f.wait(now); got != step.waitBeforeChange {
			t.Errorf("%s: wait %v, want %v", step.name, got, step.waitBeforeChange)
		}
		summary, wait := f.next(current, now)
		if summary.Count != step.shown || wait != step.wait {
			t.Errorf("%s: shows %d failing, waits %v; want %d, %v", step.name, summary.Count, wait, step.shown, step.wait)
		}
		f.showed(summary, now)
	}
}
