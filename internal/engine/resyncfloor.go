package engine

import (
	"math"
	"time"
)

// DefaultMinResyncAfter is the default of Options.MinResyncAfter: a
// hook's resyncAfterSeconds above zero and below one second is raised to
// one second, the floor metacontroller itself puts on
// resyncPeriodSeconds. metacontroller takes resyncAfterSeconds as given,
// so an answer of 1e-9 queues the object again at once, after every
// sync: a hook calling itself in a hot loop.
const DefaultMinResyncAfter = time.Second

// resyncDelay is the delay before the sync that resyncAfterSeconds asks
// for: none when it is not above zero; else that long, at least floor,
// and at most the longest time.Duration (a larger value would overflow
// it).
func resyncDelay(resyncAfterSeconds float64, floor time.Duration) time.Duration {
	if !(resyncAfterSeconds > 0) {
		return 0
	}
	if resyncAfterSeconds >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(resyncAfterSeconds*float64(time.Second)), floor)
}

// minResyncAfter is Options.MinResyncAfter, defaulted.
func (o *Options) minResyncAfter() time.Duration {
	if o.MinResyncAfter <= 0 {
		return DefaultMinResyncAfter
	}
	return o.MinResyncAfter
}
