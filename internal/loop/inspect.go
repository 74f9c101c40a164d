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
