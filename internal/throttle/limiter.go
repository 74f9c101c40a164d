package throttle

import (
	"container/list"
	"context"
	"net/http"
	"strings"
	"sync"
)

// DecreaseFactor is what a 429 multiplies the cap by: as CUBIC's, a gentler
// cut than TCP Reno's half, for the server's queues keep it busy while the
// requests in flight fall below its concurrency.
const DecreaseFactor = 0.7

// maxCap is the cap past which the Limiter stops capping: so many requests
// in flight are not limited by anything a cap would do.
const maxCap = 1 << 20

// Gauge is a metric set to a value (a prometheus.Gauge).
type Gauge interface{ Set(float64) }

// Options configures a Limiter. Every field may be left zero.
type Options struct {
	// InFlight, when set, is set to the number of capped requests in
	// flight whenever it changes.
	InFlight Gauge
	// Cap, when set, is set to the cap whenever it changes: 0 while there
	// is none.
	Cap Gauge
}

// Limiter caps the API requests in flight by the server's 429 answers; the
// package doc says how. Use it through RoundTripper. The zero value is not
// usable: call New.
type Limiter struct {
	opts Options

	mu sync.Mutex
	// capped is false until the first 429 (and again past maxCap).
	capped bool
	// limit is the cap while capped: at most its whole part of requests
	// are in flight.
	limit float64
	// epoch counts the decreases; a request carries the epoch it was
	// sent in, and only one of the current epoch decreases the cap.
	epoch uint64
	// inFlight counts the capped requests sent and not yet answered.
	inFlight int
	// waiting holds the *waiter of each request over the cap, oldest
	// first.
	waiting list.List
}

// waiter is a request waiting for room.
type waiter struct {
	// ready is closed when the request may be sent, with granted and
	// epoch set first (under Limiter.mu).
	ready   chan struct{}
	granted bool
	epoch   uint64
}

// New returns a Limiter with no cap until the first 429.
func New(opts Options) *Limiter {
	l := &Limiter{opts: opts}
	l.publishLocked()
	return l
}

// Cap returns the cap, and false while there is none.
func (l *Limiter) Cap() (float64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit, l.capped
}

// acquire waits until a capped request may be sent and counts it in flight;
// it returns the epoch the request is sent in, or ctx's error if ctx ends
// first (the request is then not in flight).
func (l *Limiter) acquire(ctx context.Context) (uint64, error) {
	l.mu.Lock()
	if l.waiting.Len() == 0 && l.admitsLocked() {
		l.inFlight++
		epoch := l.epoch
		l.publishLocked()
		l.mu.Unlock()
		return epoch, nil
	}
	w := &waiter{ready: make(chan struct{})}
	elem := l.waiting.PushBack(w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		return w.epoch, nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		if w.granted {
			// Granted as ctx ended: give the room to the next.
			l.inFlight--
			l.grantLocked()
			l.publishLocked()
		} else {
			l.waiting.Remove(elem)
		}
		return 0, ctx.Err()
	}
}

// release ends a capped request sent in epoch, answered with code (0: no
// answer).
func (l *Limiter) release(epoch uint64, code int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case code == http.StatusTooManyRequests:
		l.decreaseLocked(epoch, l.inFlight)
	case code != 0 && l.capped:
		l.limit += 1 / l.limit
		if l.limit > maxCap {
			l.capped = false
		}
	}
	l.inFlight--
	l.grantLocked()
	l.publishLocked()
}

// currentEpoch is the epoch a request not capped (a watch, a Lease) is
// sent in.
func (l *Limiter) currentEpoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// uncappedThrottled counts a 429 answering a request not capped (a watch, a
// Lease) sent in epoch.
func (l *Limiter) uncappedThrottled(epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// The watch was never counted in flight: it counts with the rest.
	l.decreaseLocked(epoch, l.inFlight+1)
	l.grantLocked()
	l.publishLocked()
}

// decreaseLocked lowers the cap for a 429 answering a request sent in
// epoch, when inFlight requests (the answered one included) were in flight.
func (l *Limiter) decreaseLocked(epoch uint64, inFlight int) {
	if epoch != l.epoch {
		// Sent before the last decrease: the overload it reports was
		// answered already.
		return
	}
	base := l.limit
	if !l.capped {
		base = float64(inFlight)
		l.capped = true
	}
	l.limit = max(1, base*DecreaseFactor)
	l.epoch++
}

// admitsLocked reports whether one more capped request may be in flight.
func (l *Limiter) admitsLocked() bool {
	return !l.capped || l.inFlight < int(l.limit)
}

// grantLocked lets the oldest waiters go while there is room.
func (l *Limiter) grantLocked() {
	for l.waiting.Len() > 0 && l.admitsLocked() {
		w := l.waiting.Remove(l.waiting.Front()).(*waiter)
		l.inFlight++
		w.granted, w.epoch = true, l.epoch
		close(w.ready)
	}
}

func (l *Limiter) publishLocked() {
	if l.opts.InFlight != nil {
		l.opts.InFlight.Set(float64(l.inFlight))
	}
	if l.opts.Cap != nil {
		c := 0.0
		if l.capped {
			c = l.limit
		}
		l.opts.Cap.Set(c)
	}
}

// RoundTripper returns rt with every request but watches and Leases
// counted in flight and held while over the cap, and every answer fed to
// the Limiter (a rest.Config's Wrap takes it).
func (l *Limiter) RoundTripper(rt http.RoundTripper) http.RoundTripper {
	return &roundTripper{l: l, next: rt}
}

type roundTripper struct {
	l    *Limiter
	next http.RoundTripper
}

func (r *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) || isLease(req) {
		epoch := r.l.currentEpoch()
		resp, err := r.next.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			r.l.uncappedThrottled(epoch)
		}
		return resp, err
	}
	epoch, err := r.l.acquire(req.Context())
	if err != nil {
		// A RoundTripper closes the request's body, even on errors.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	resp, err := r.next.RoundTrip(req)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	r.l.release(epoch, code)
	return resp, err
}

// isLease reports whether req reads or writes a Lease: a leader's renewal
// must not wait behind the requests it protects, or a slow server would
// cost the leader its Lease.
func isLease(req *http.Request) bool {
	return strings.HasPrefix(req.URL.Path, "/apis/coordination.k8s.io/")
}

// isWatch reports whether req opens a watch (client-go's watch=true
// parameter; the /watch/ paths are deprecated and unused by client-go).
func isWatch(req *http.Request) bool {
	if !strings.Contains(req.URL.RawQuery, "watch=") {
		return false
	}
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}
