// Package echo tells the watch events a controller's own writes cause (their
// echoes) apart from changes made by anyone else, so that a controller does
// not sync an object again only because it wrote it.
//
// An Echoes is the bookkeeping of one controller. Its caller records each
// object a write returned (Expect), brackets each sync of a queue key with
// Begin and End, and passes every watch event through ShouldEnqueue. It
// guarantees:
//
//   - No change is lost. An event is dropped only if it is an echo: it is
//     queued for the key whose sync made a write recorded by Expect less
//     than two minutes before the event is judged, and its object's UID and
//     resourceVersion are that write's. Each recorded version is the echo of
//     at most one event; the same event queued for another key (two
//     handlers watching one resource) is no echo there. An event without an
//     object (a delete) is never an echo.
//   - An event that arrives while its key is being synced (between Begin and
//     End) is not enqueued then: it is held, and End, which runs after the
//     sync has recorded its writes, returns the triggers of the held events
//     that were not echoes: the key needs another sync, for them. An echo
//     leaves no trigger behind. So an echo that
//     arrives before the response to its write is still recognised.
//   - Memory stays bounded: an expected version is forgotten when its echo
//     arrives, when Forget drops its object, or, once it is older than two
//     minutes, at the next sweep (one every 1024 recorded writes).
//
// A key's Begin and End must not overlap another Begin of the same key,
// which a work queue ensures by handing a key to one worker at a time. Keys
// are opaque values of any comparable type (a controller's queue keys).
// Echoes is safe for concurrent use.
package echo
