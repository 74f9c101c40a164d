package echo

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/trigger"
)

// echoTTL bounds how long an expected echo counts: an echo that never
// arrives (the informer re-listed past it) counts no more after it, and is
// forgotten at the next sweep.
const echoTTL = 2 * time.Minute

// sweepEvery is how many recorded writes pass between two sweeps of expired
// echoes.
const sweepEvery = 1024

// Echoes remembers the writes a controller made so that the watch events
// they cause, their echoes, can be told apart from changes by others. A
// controller that already acted on the result of its own write need not
// sync again when the write comes back through the informer.
//
// An echo may arrive before the write's response does, while the sync that
// made it is still running. So events for a key being synced (between
// Begin and End) are held, and judged at End, when the sync has recorded
// its writes with Expect: End asks for another sync if any held event was
// not an echo.
//
// A write is expected for the key whose sync made it: an object version
// (UID and resourceVersion) counts as an echo at most once, and only for
// an event queued for that key. The package doc states the guarantees.
// Keys are of the controller's type K. Echoes is safe for concurrent use.
type Echoes[K comparable] struct {
	mu       sync.Mutex
	expected map[types.UID]map[string]expectation[K]
	inflight map[K][]heldEvent
	writes   int
}

// expectation is a written version's expected echo: the key whose sync
// wrote it, and when.
type expectation[K comparable] struct {
	key K
	at  time.Time
}

// heldEvent is an event held for a key being synced, with its trigger;
// any marks an event that always needs a sync (a delete).
type heldEvent struct {
	uid     types.UID
	rv      string
	any     bool
	trigger trigger.Trigger
}

// New returns an empty Echoes.
func New[K comparable]() *Echoes[K] {
	return &Echoes[K]{expected: map[types.UID]map[string]expectation[K]{}, inflight: map[K][]heldEvent{}}
}

// Begin marks key as being synced: events for it are held until End.
func (e *Echoes[K]) Begin(key K) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight[key] = nil
}

// End ends the sync of key and returns the triggers of the events held
// meanwhile that need another sync (they were not echoes of writes
// recorded by Expect), in the order they came; none when every one was
// an echo.
func (e *Echoes[K]) End(key K) (resync []trigger.Trigger) {
	e.mu.Lock()
	defer e.mu.Unlock()
	held := e.inflight[key]
	delete(e.inflight, key)
	for _, ev := range held {
		if ev.any || !e.isEchoLocked(key, ev.uid, ev.rv) {
			resync = append(resync, ev.trigger)
		}
	}
	return resync
}

// ShouldEnqueue takes an event about obj (nil for one that always counts,
// such as a delete) for key, with its trigger t, and reports whether key
// should be enqueued now: false for an echo of a write of key's own sync,
// which it consumes, and false
// while key is being synced, when it holds the event (and t) for End to
// judge; true otherwise.
func (e *Echoes[K]) ShouldEnqueue(key K, obj metav1.Object, t trigger.Trigger) bool {
	return e.ShouldEnqueueFunc(key, obj, func() trigger.Trigger { return t })
}

// ShouldEnqueueFunc is ShouldEnqueue with the trigger built by trigger,
// called only when the event is held: an echo costs no trigger.
func (e *Echoes[K]) ShouldEnqueueFunc(key K, obj metav1.Object, trigger func() trigger.Trigger) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if held, ok := e.inflight[key]; ok {
		ev := heldEvent{any: obj == nil, trigger: trigger()}
		if obj != nil {
			ev.uid, ev.rv = obj.GetUID(), obj.GetResourceVersion()
		}
		e.inflight[key] = append(held, ev)
		return false
	}
	return obj == nil || !e.isEchoLocked(key, obj.GetUID(), obj.GetResourceVersion())
}

// Expect records obj, as a write of the sync of key returned it, as an
// expected echo for key: the same event queued for another key (an object
// watched by two of the controller's handlers, as a child that is also of
// the parent resource) is no echo there, and leaves this one expected.
func (e *Echoes[K]) Expect(key K, obj metav1.Object) {
	if obj == nil || obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	versions := e.expected[obj.GetUID()]
	if versions == nil {
		versions = map[string]expectation[K]{}
		e.expected[obj.GetUID()] = versions
	}
	versions[obj.GetResourceVersion()] = expectation[K]{key: key, at: now}
	if e.writes++; e.writes%sweepEvery == 0 {
		e.expireLocked(now)
	}
}

// isEchoLocked reports whether the version uid/rv is one the sync of key
// wrote and was expecting, and forgets it. e.mu must be held.
func (e *Echoes[K]) isEchoLocked(key K, uid types.UID, rv string) bool {
	versions, ok := e.expected[uid]
	if !ok {
		return false
	}
	want, ok := versions[rv]
	if !ok || want.key != key {
		return false
	}
	delete(versions, rv)
	if len(versions) == 0 {
		delete(e.expected, uid)
	}
	return time.Since(want.at) < echoTTL
}

// Forget drops what is expected of the object with uid, e.g. when it is
// deleted.
func (e *Echoes[K]) Forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.expected, uid)
}

// expireLocked forgets the expected echoes older than echoTTL. e.mu must be
// held.
func (e *Echoes[K]) expireLocked(now time.Time) {
	for uid, versions := range e.expected {
		for rv, want := range versions {
			if now.Sub(want.at) > echoTTL {
				delete(versions, rv)
			}
		}
		if len(versions) == 0 {
			delete(e.expected, uid)
		}
	}
}
