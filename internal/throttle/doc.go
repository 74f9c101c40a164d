// Package throttle paces metactl's requests to the API server by the
// server's own answers, so that the API server, not a fixed client-side
// rate, sets the pace.
//
// The API server protects itself with API Priority and Fairness (APF): each
// flow of requests gets a share of the server's concurrency, requests over
// it wait in the server's queues, and when those are full the server
// answers 429 Too Many Requests with a Retry-After header. client-go waits
// that long and sends the request again (up to 10 times). A fixed
// client-side rate either throttles a client below what a large server
// takes, or lets it overrun a small priority level. Limiter instead caps
// the number of requests in flight (not their rate, since APF shares
// concurrency, not rate) by additive increase and multiplicative decrease,
// as TCP paces a connection:
//
//   - Until the server first answers 429 there is no cap: every request is
//     sent at once.
//   - A 429 sets the cap to DecreaseFactor times the requests in flight when
//     it came (a first 429) or the cap (a later one), never below 1. Only a
//     request sent after the last decrease can decrease the cap again, so a
//     burst of 429s from one overload counts once.
//   - Every answer that is not a 429 raises the cap by 1/cap: by one for
//     each cap's worth of answers, about one per round trip while the cap
//     binds.
//   - Requests over the cap wait in the order they came, each until a
//     request in flight ends or its own context is done (the wait then
//     fails with the context's error, and nothing is sent).
//
// What counts as in flight: every request that goes through
// Limiter.RoundTripper, from the moment it is sent until its answer's
// headers arrive (or it fails), except watches, which stay open, and
// requests for Leases (coordination.k8s.io), so that a leader's renewal
// never waits behind the writes it protects; neither is ever capped, and a
// 429 answering one still lowers the cap.
//
// Guarantees: no more than the cap's whole part of capped requests are in
// flight at once, once the cap is set; a waiting request is sent before any
// that came after it; a request whose context ends while it waits is never
// sent. A Limiter is safe for concurrent use.
//
// The package imports nothing of metactl.
package throttle
