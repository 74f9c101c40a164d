package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/textcut"
)

// failingNamed is how many failing objects a FailingSummary's message
// names; the count covers them all.
const failingNamed = 3

// maxErrorLength bounds the error quoted in a FailingSummary's message, in
// bytes ("..." included when it is cut).
const maxErrorLength = 500

// Failing is the set of one controller's objects whose last sync failed,
// each with its error. track maintains it from the sync results: an object
// enters on a failed sync and leaves on a successful one, which includes
// the sync that finds it gone. A conflict changes nothing (the retry
// resolves it), nor does a sync that waits (loop.ErrWaiting: a hook that
// has not settled wrote what it asked for, and is reported on its own).
// Safe for concurrent use.
type Failing struct {
	// Describe names an object in the summary by its work-queue key; nil
	// uses the key.
	Describe func(key Key) string

	mu       sync.Mutex
	errs     map[Key]string // by work-queue key
	onChange func()
}

// OnChange sets f to be called, from a sync's goroutine, each time the set
// or an object's error changes. f must not block.
func (f *Failing) OnChange(fn func()) {
	f.mu.Lock()
	f.onChange = fn
	f.mu.Unlock()
}

// track returns sync recording its results in f.
func (f *Failing) track(sync loop.SyncFunc[Key]) loop.SyncFunc[Key] {
	return func(ctx context.Context, s *loop.Sync[Key]) (time.Duration, error) {
		key := s.Key
		after, err := sync(ctx, s)
		switch {
		case err != nil && ctx.Err() != nil:
			// Cancelled by Stop: not the object's failure (the loop does
			// not retry it either), and nothing changes.
		case err == nil, errors.Is(err, loop.ErrWaiting):
			f.Succeeded(key)
		case !onlyConflicts(err):
			f.Failed(key, err)
		}
		return after, err
	}
}

// Failed records that the sync of the object queued as key failed with err.
func (f *Failing) Failed(key Key, err error) {
	msg := err.Error()
	f.mu.Lock()
	old, had := f.errs[key]
	if f.errs == nil {
		f.errs = map[Key]string{}
	}
	f.errs[key] = msg
	notify := f.onChange
	f.mu.Unlock()
	if notify != nil && (!had || old != msg) {
		notify()
	}
}

// Succeeded records that the sync of the object queued as key succeeded,
// or found it gone.
func (f *Failing) Succeeded(key Key) {
	f.mu.Lock()
	_, had := f.errs[key]
	delete(f.errs, key)
	notify := f.onChange
	f.mu.Unlock()
	if notify != nil && had {
		notify()
	}
}

// forgetIf drops the objects whose key forget reports, as neither failing
// nor succeeding: their syncs are no longer this replica's (Gate).
func (f *Failing) forgetIf(forget func(Key) bool) {
	f.mu.Lock()
	changed := false
	for key := range f.errs {
		if forget(key) {
			delete(f.errs, key)
			changed = true
		}
	}
	notify := f.onChange
	f.mu.Unlock()
	if notify != nil && changed {
		notify()
	}
}

// FailingSummary is what a controller object's status shows of its
// failing objects.
type FailingSummary struct {
	// Count is the number of objects whose last sync failed.
	Count int
	// Message names up to failingNamed of them, in key order, and quotes
	// the first one's error; empty when Count is 0.
	Message string
}

// Summary returns the set as a controller object's status shows it. The
// objects named are the first in key order, so that the message stays the
// same while the same objects fail with the same error.
func (f *Failing) Summary() FailingSummary {
	f.mu.Lock()
	keys := make([]Key, 0, len(f.errs))
	for key := range f.errs {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	var firstErr string
	if len(keys) > 0 {
		firstErr = f.errs[keys[0]]
	}
	f.mu.Unlock()
	if len(keys) == 0 {
		return FailingSummary{}
	}
	describe := f.Describe
	if describe == nil {
		describe = Key.String
	}
	firstErr = textcut.Cut(firstErr, maxErrorLength)
	var b strings.Builder
	if len(keys) == 1 {
		b.WriteString("1 object failed its last sync: ")
	} else {
		fmt.Fprintf(&b, "%d objects failed their last sync: ", len(keys))
	}
	fmt.Fprintf(&b, "%s: %s", describe(keys[0]), firstErr)
	if len(keys) > 1 {
		named := keys[1:min(len(keys), failingNamed)]
		others := make([]string, len(named))
		for i, key := range named {
			others[i] = describe(key)
		}
		b.WriteString("; also " + strings.Join(others, ", "))
		if more := len(keys) - failingNamed; more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	b.WriteString(" (see the objects' Events)")
	return FailingSummary{Count: len(keys), Message: b.String()}
}
