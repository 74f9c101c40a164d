package loop

import (
	"context"
	"sync"
	"time"
)

// MaxTriggers bounds the triggers a key gathers while it waits for its
// sync (distinct ones; a trigger queued again while pending counts once).
// Those beyond it are counted (TriggersDroppedOf), not kept: a key whose
// children all change at once would otherwise hold one per child.
const MaxTriggers = 8

// pending is what triggers keys gathered while they wait for a sync. A
// trigger queued with a delay (AddAfterFor) is kept with the time it is
// due and counts only from then on, so that a sync that runs earlier for
// another cause does not take it: the sync at its time does.
type pending struct {
	mu   sync.Mutex
	keys map[string]*keyTriggers
}

type keyTriggers struct {
	// triggers are in the order they were queued or, for a delayed one,
	// became due; each distinct, with the earliest due time.
	triggers []dueTrigger
	// dropped counts the distinct triggers not kept for MaxTriggers.
	dropped int
}

type dueTrigger struct {
	Trigger
	due time.Time
}

// add records t for key, due at due.
func (p *pending) add(key string, t Trigger, due time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.keys = map[string]*keyTriggers{}
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
		// Keep the delayed ones (the loop's retries and resyncs, a few
		// distinct at most): each is the only cause of the sync at its
		// time. Drop the newest trigger due now, else this one.
		drop := -1
		for i := len(k.triggers) - 1; i >= 0; i-- {
			if !k.triggers[i].due.After(time.Now()) {
				drop = i
				break
			}
		}
		if drop < 0 || !due.After(time.Now()) {
			k.dropped++
			return
		}
		k.triggers = append(k.triggers[:drop], k.triggers[drop+1:]...)
		k.dropped++
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

// take removes and returns the triggers of key due by now, first first,
// with the count of those dropped, and the time the first one left is due
// (zero when none is left).
func (p *pending) take(key string, now time.Time) (taken []Trigger, dropped int, next time.Time) {
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
	taken = make([]Trigger, n)
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

// forgetDelayed drops the triggers of key not due by now: the retries and
// resyncs of an object found gone.
func (p *pending) forgetDelayed(key string, now time.Time) {
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

// AddFor queues key now, for t.
func (l *Loop) AddFor(key string, t Trigger) {
	l.pending.add(key, t, time.Now())
	l.queue.Add(key)
}

// AddAfterFor queues key after delay, for t, which counts as a trigger of
// key's syncs only from then on.
func (l *Loop) AddAfterFor(key string, delay time.Duration, t Trigger) {
	if delay <= 0 {
		l.AddFor(key, t)
		return
	}
	l.pending.add(key, t, time.Now().Add(delay))
	l.queue.AddAfter(key, delay)
}

type syncInfoKey struct{}

// syncInfo is what a sync is told of why it runs, and tells the loop.
type syncInfo struct {
	triggers []Trigger
	dropped  int
	mu       sync.Mutex
	gone     bool
}

// TriggersOf returns, from within a SyncFunc called by a Loop (ctx is the
// one it got, or derived from it), the triggers of the sync: why its key
// was queued since its last sync, first first; nil outside a Loop's sync.
func TriggersOf(ctx context.Context) []Trigger {
	if s, ok := ctx.Value(syncInfoKey{}).(*syncInfo); ok {
		return s.triggers
	}
	return nil
}

// TriggersDroppedOf returns how many more distinct triggers the sync had
// beyond MaxTriggers, which TriggersOf does not list.
func TriggersDroppedOf(ctx context.Context) int {
	if s, ok := ctx.Value(syncInfoKey{}).(*syncInfo); ok {
		return s.dropped
	}
	return 0
}

// Gone tells the loop, from within a SyncFunc called by a Loop, that the
// sync found its object gone: the triggers queued with a delay for it
// (retries, resyncs) are dropped, and the syncs they would cause, finding
// no trigger, do not run. A trigger queued since the sync began (the
// object created again) is kept.
func Gone(ctx context.Context) {
	if s, ok := ctx.Value(syncInfoKey{}).(*syncInfo); ok {
		s.mu.Lock()
		s.gone = true
		s.mu.Unlock()
	}
}

func (s *syncInfo) isGone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}
