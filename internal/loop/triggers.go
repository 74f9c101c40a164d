package loop

import (
	"slices"
	"sync"
	"time"

	"github.com/metactl/metactl/internal/trigger"
)

// MaxTriggers bounds the triggers a key gathers while it waits for its
// sync (distinct ones; a trigger queued again while pending counts once).
// Those beyond it are counted (Sync.TriggersDropped), not kept: a key whose
// children all change at once would otherwise hold one per child.
const MaxTriggers = 8

// pending is what triggers keys gathered while they wait for a sync. A
// trigger queued with a delay (AddAfterFor) is kept with the time it is
// due and counts only from then on, so that a sync that runs earlier for
// another cause does not take it: the sync at its time does.
type pending[K comparable] struct {
	mu   sync.Mutex
	keys map[K]*keyTriggers
}

type keyTriggers struct {
	// triggers are in the order they were queued or, for a delayed one,
	// became due; each distinct, with the earliest due time.
	triggers []dueTrigger
	// dropped counts the distinct triggers not kept for MaxTriggers.
	dropped int
}

type dueTrigger struct {
	trigger.Trigger
	due time.Time
}

// add records t for key, due at due.
func (p *pending[K]) add(key K, t trigger.Trigger, due time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.keys = map[K]*keyTriggers{}
	}
	k := p.keys[key]
	if k == nil {
		k = &keyTriggers{}
		p.keys[key] = k
	}
	for i := range k.triggers {
		if k.triggers[i].Trigger == t {
			if due.Before(k.triggers[i].due) {
				// Due sooner: it moves to its new place in the order.
				k.triggers = append(k.triggers[:i], k.triggers[i+1:]...)
				break
			}
			return
		}
	}
	if len(k.triggers) >= MaxTriggers {
		k.dropped++
		if !k.evictFor(due, time.Now()) {
			return
		}
	}
	// Insert in due order (stable: after those due at the same time).
	i := len(k.triggers)
	for i > 0 && k.triggers[i-1].due.After(due) {
		i--
	}
	k.triggers = append(k.triggers, dueTrigger{})
	copy(k.triggers[i+1:], k.triggers[i:])
	k.triggers[i] = dueTrigger{Trigger: t, due: due}
}

// evictFor makes room, in a full list, for a trigger due at due, and
// reports whether it did (false: that trigger is the one to drop). The
// triggers due by now are what makes the sync the queue runs next do
// anything: the last of them is never evicted, else that sync, finding
// none, is skipped. Beyond that the delayed ones (the loop's retries and
// resyncs, a few distinct at most) are kept, each the only cause of the
// sync at its time: a trigger due now evicts none when one is due
// already, and the latest delayed one when none is; a delayed trigger
// evicts the newest trigger due now when two or more are, else the
// latest delayed one when that is due after it.
func (k *keyTriggers) evictFor(due, now time.Time) bool {
	nDue := 0
	for nDue < len(k.triggers) && !k.triggers[nDue].due.After(now) {
		nDue++
	}
	last := len(k.triggers) - 1
	switch {
	case !due.After(now) && nDue > 0:
		return false
	case !due.After(now):
		k.triggers = k.triggers[:last]
	case nDue > 1:
		k.triggers = append(k.triggers[:nDue-1], k.triggers[nDue:]...)
	case last >= nDue && k.triggers[last].due.After(due):
		k.triggers = k.triggers[:last]
	default:
		return false
	}
	return true
}

// take removes and returns the triggers of key due by now, first first,
// with the count of those dropped, and the time the first one left is due
// (zero when none is left).
func (p *pending[K]) take(key K, now time.Time) (taken []trigger.Trigger, dropped int, next time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys[key]
	if k == nil {
		return nil, 0, time.Time{}
	}
	n := 0
	for n < len(k.triggers) && !k.triggers[n].due.After(now) {
		n++
	}
	taken = make([]trigger.Trigger, n)
	for i := range n {
		taken[i] = k.triggers[i].Trigger
	}
	dropped = k.dropped
	k.dropped = 0
	k.triggers = append(k.triggers[:0], k.triggers[n:]...)
	if len(k.triggers) == 0 {
		delete(p.keys, key)
		return taken, dropped, time.Time{}
	}
	return taken, dropped, k.triggers[0].due
}

// queuedSince returns when the first trigger of key due by now became
// due: since when key waits in the queue for a worker; zero when none is
// due.
func (p *pending[K]) queuedSince(key K, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys[key]
	if k == nil || len(k.triggers) == 0 || k.triggers[0].due.After(now) {
		return time.Time{}
	}
	return k.triggers[0].due
}

// forgetDelayed drops the triggers of key not due by now: the retries and
// resyncs of an object found gone.
func (p *pending[K]) forgetDelayed(key K, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys[key]
	if k == nil {
		return
	}
	n := 0
	for n < len(k.triggers) && !k.triggers[n].due.After(now) {
		n++
	}
	k.triggers = k.triggers[:n]
	if len(k.triggers) == 0 && k.dropped == 0 {
		delete(p.keys, key)
	}
}

// nextDelayed returns when the first trigger of key not due by now is
// due, leaving out trigger.CauseRetry ones unless retries; zero when none is.
func (p *pending[K]) nextDelayed(key K, now time.Time, retries bool) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys[key]
	if k == nil {
		return time.Time{}
	}
	for _, t := range k.triggers {
		if t.due.After(now) && (retries || t.Cause != trigger.CauseRetry) {
			return t.due
		}
	}
	return time.Time{}
}

// NextDelayed returns when the first trigger queued for the key with a
// delay (AddAfterFor) and not yet due is due: a later sync of the key that
// no new event causes. trigger.CauseRetry triggers are left out unless
// retries (a successful sync drops them). Zero when none is pending, and
// outside a Loop's sync.
func (s *Sync[K]) NextDelayed(retries bool) time.Time {
	if !s.inLoop() {
		return time.Time{}
	}
	return s.loop.pending.nextDelayed(s.Key, time.Now(), retries)
}

// forgetRetries drops the trigger.CauseRetry triggers of key: after a successful
// sync, the retries of an earlier failure.
func (p *pending[K]) forgetRetries(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys[key]
	if k == nil {
		return
	}
	k.triggers = slices.DeleteFunc(k.triggers, func(t dueTrigger) bool { return t.Cause == trigger.CauseRetry })
	if len(k.triggers) == 0 && k.dropped == 0 {
		delete(p.keys, key)
	}
}

// AddFor queues key now, for t.
func (l *Loop[K]) AddFor(key K, t trigger.Trigger) {
	l.pending.add(key, t, time.Now())
	l.queue.Add(key)
}

// AddAfterFor queues key after delay, for t, which counts as a trigger of
// key's syncs only from then on.
func (l *Loop[K]) AddAfterFor(key K, delay time.Duration, t trigger.Trigger) {
	if delay <= 0 {
		l.AddFor(key, t)
		return
	}
	l.pending.add(key, t, time.Now().Add(delay))
	l.queue.AddAfter(key, delay)
}

// Triggers returns the triggers of the sync: why its key was queued since
// its last sync, first first; nil outside a Loop's sync.
func (s *Sync[K]) Triggers() []trigger.Trigger {
	if s == nil {
		return nil
	}
	return s.triggers
}

// TriggersDropped returns how many more distinct triggers the sync had
// beyond MaxTriggers, which Triggers does not list.
func (s *Sync[K]) TriggersDropped() int {
	if s == nil {
		return 0
	}
	return s.dropped
}

// Gone tells the loop that the sync found its object gone: the triggers
// queued with a delay for it (retries, resyncs) are dropped, and the
// syncs they would cause, finding no trigger, do not run. A trigger
// queued since the sync began (the object created again) is kept. Outside
// a Loop's sync it does nothing.
func (s *Sync[K]) Gone() {
	if !s.inLoop() {
		return
	}
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
}

func (s *Sync[K]) isGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}
