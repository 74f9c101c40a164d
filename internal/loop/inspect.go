package loop

import "time"

// Inspect returns, for `metactl explain`, when the sync of key in flight
// began (zero when none is) and how many times in a row key has failed or
// waited (the rate limiter's count, reset by a success). Cheap: a map
// lookup under the loop's lock and the limiter's.
func (l *Loop[K]) Inspect(key K) (syncingSince time.Time, failures int) {
	l.inFlightMu.Lock()
	syncingSince = l.inFlight[key]
	l.inFlightMu.Unlock()
	return syncingSince, l.opts.RateLimiter.NumRequeues(key)
}

// QueuedSince returns, for `metactl explain`, since when key waits in the
// queue for a sync to start: the time its oldest trigger not yet taken by
// a sync became due; zero when it waits for none (not queued, or queued
// only after a delay still to come). A key being synced can be queued too:
// for the sync after this one. Cheap: a map lookup under the triggers'
// lock.
func (l *Loop[K]) QueuedSince(key K) time.Time {
	return l.pending.queuedSince(key, time.Now())
}
