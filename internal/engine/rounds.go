package engine

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/metrics"
)

// MaxRounds bounds the hook calls of one sync. A sync calls the hook again
// while its last answer asked for a write (children written, or a status,
// label or annotation that differs from what the hook was given), giving it
// the object as that write leaves it; it stops at the first answer that asks
// for none, the fixed point. A hook whose status only counts its children
// gets there in three calls on create and two on update, as many as
// metacontroller makes when it re-syncs on its own writes.
//
// A hook still asking for writes after MaxRounds calls (a timestamp or a
// counter in its status) does not settle: what it asked for last is
// written, and the object is synced again through the work queue's rate
// limiter, never in a hot loop (see Unsettled).
const MaxRounds = 5

// Unsettled reports the objects whose hook did not settle: once per object
// as a Warning Event (reason HookNotSettled) and each time in the
// metactl_syncs_unsettled_total metric, until the object settles again.
// Safe for concurrent use.
type Unsettled struct {
	// Controller names the controller in the metric and the Event.
	Controller string
	// Kind is the controller's kind as Events name it
	// ("compositecontroller", "decoratorcontroller").
	Kind string
	// Recorder records the Event.
	Recorder record.EventRecorder

	mu       sync.Mutex
	reported map[Key]bool // by work-queue key
}

// finish ends a sync whose writes are done and returns what the sync
// returns: when the hook settled, delay, the delay its resyncAfterSeconds
// asks for (resyncDelay of the shortest any answer of the sync asked
// for; 0 for none); when it did not, errNotSettled after reporting it,
// and a positive delay still asks addAfter for a sync after it (whichever
// of it and the backoff is sooner wins).
func (u *Unsettled) finish(obj runtime.Object, key Key, settled bool, delay time.Duration, addAfter func(key Key, delay time.Duration)) (time.Duration, error) {
	if settled {
		u.Settled(key)
		return delay, nil
	}
	u.Report(obj, key)
	if delay > 0 {
		addAfter(key, delay)
	}
	return 0, errNotSettled
}

// Report records that the hook of obj, queued as key, did not settle in
// this sync.
func (u *Unsettled) Report(obj runtime.Object, key Key) {
	metrics.UnsettledSyncs.WithLabelValues(u.Controller).Inc()
	u.mu.Lock()
	first := !u.reported[key]
	if first {
		if u.reported == nil {
			u.reported = map[Key]bool{}
		}
		u.reported[key] = true
	}
	u.mu.Unlock()
	if first {
		u.Recorder.Eventf(obj, corev1.EventTypeWarning, ReasonHookNotSettled,
			"%s %s: the sync hook still asked for changes after %d calls in one sync (a status that changes on every call, such as a timestamp or a counter, never settles); the last answer was written and the object is synced again with backoff",
			u.Kind, u.Controller, MaxRounds)
	}
}

// forgetIf forgets the reports of the objects whose key forget reports.
func (u *Unsettled) forgetIf(forget func(Key) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for key := range u.reported {
		if forget(key) {
			delete(u.reported, key)
		}
	}
}

// Settled records that the hook of the object queued as key reached a
// fixed point, or that the object is gone: a later failure to settle is
// reported again.
func (u *Unsettled) Settled(key Key) {
	u.mu.Lock()
	delete(u.reported, key)
	u.mu.Unlock()
}
