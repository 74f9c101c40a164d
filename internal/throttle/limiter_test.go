package throttle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// acquireN sends n requests and fails the test if one waits.
func acquireN(t *testing.T, l *Limiter, n int) []uint64 {
	t.Helper()
	epochs := make([]uint64, n)
	for i := range epochs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e, err := l.acquire(ctx)
		cancel()
		if err != nil {
			t.Fatalf("request %d of %d waited: %v", i+1, n, err)
		}
		epochs[i] = e
	}
	return epochs
}

// mustWait checks that a request is held now: its acquire fails once its
// context, already cancelled, is looked at.
func mustWait(t *testing.T, l *Limiter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.acquire(ctx); err == nil {
		t.Fatal("a request over the cap was let through")
	}
}

func TestNoCapUntilA429(t *testing.T) {
	l := New(Options{})
	acquireN(t, l, 10_000)
	if _, capped := l.Cap(); capped {
		t.Fatal("capped without a 429")
	}
}

func TestA429CapsAtAFractionOfTheRequestsInFlight(t *testing.T) {
	l := New(Options{})
	epochs := acquireN(t, l, 100)
	l.release(epochs[0], http.StatusTooManyRequests)
	c, capped := l.Cap()
	if !capped || c != 70 {
		t.Fatalf("cap %v (capped %v) after a 429 with 100 in flight, want 70", c, capped)
	}
	// 99 still in flight: every new request waits until 29 more end.
	mustWait(t, l)
	for _, e := range epochs[1:29] {
		l.release(e, http.StatusOK)
	}
	mustWait(t, l) // 71 in flight, and the cap grew by 28/70-ish only
	for _, e := range epochs[29:31] {
		l.release(e, http.StatusOK)
	}
	acquireN(t, l, 1)
}

func TestA429FromBeforeTheLastDecreaseCountsOnce(t *testing.T) {
	l := New(Options{})
	epochs := acquireN(t, l, 10)
	for _, e := range epochs[:5] {
		l.release(e, http.StatusTooManyRequests)
	}
	if c, _ := l.Cap(); c != 7 {
		t.Fatalf("cap %v after five 429s of one overload, want 7 (one decrease)", c)
	}
	// A request sent after the decrease lowers it again.
	for _, e := range epochs[5:] {
		l.release(e, http.StatusOK)
	}
	e := acquireN(t, l, 1)[0]
	before, _ := l.Cap()
	l.release(e, http.StatusTooManyRequests)
	if c, _ := l.Cap(); c != before*DecreaseFactor {
		t.Fatalf("cap %v after a new 429, want %v", c, before*DecreaseFactor)
	}
}

func TestTheCapNeverFallsBelowOne(t *testing.T) {
	l := New(Options{})
	for range 20 {
		e := acquireN(t, l, 1)[0]
		l.release(e, http.StatusTooManyRequests)
	}
	if c, _ := l.Cap(); c != 1 {
		t.Fatalf("cap %v, want 1", c)
	}
	e := acquireN(t, l, 1)[0]
	mustWait(t, l)
	l.release(e, http.StatusOK)
}

func TestAnswersRaiseTheCapByOneACapsWorth(t *testing.T) {
	l := New(Options{})
	epochs := acquireN(t, l, 10)
	l.release(epochs[0], http.StatusTooManyRequests) // cap 7
	for _, e := range epochs[1:] {
		l.release(e, http.StatusOK)
	}
	// 9 answers at a cap of about 7 raise it by a little more than one.
	c, _ := l.Cap()
	if c < 8 || c > 8.5 {
		t.Fatalf("cap %v after 9 answers from 7, want a little over 8", c)
	}
	// Failed requests (no answer) do not raise it.
	e := acquireN(t, l, 1)[0]
	l.release(e, 0)
	if c2, _ := l.Cap(); c2 != c {
		t.Fatalf("cap %v after a request with no answer, want %v", c2, c)
	}
}

func TestWaitersGoInOrder(t *testing.T) {
	l := New(Options{})
	epochs := acquireN(t, l, 2)
	l.release(epochs[0], http.StatusTooManyRequests) // cap 1.4: one in flight
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 5 {
		// Queue them one after another.
		queued := l.waitingLen() + 1
		wg.Go(func() {
			e, err := l.acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			// No answer: the cap stays, one request at a time.
			l.release(e, 0)
		})
		for deadline := time.Now().Add(5 * time.Second); l.waitingLen() < queued; {
			if time.Now().After(deadline) {
				t.Fatal("request did not queue")
			}
			time.Sleep(time.Millisecond)
		}
	}
	l.release(epochs[1], 0)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("sent in order %v, want 0 to 4", order)
		}
	}
}

func TestACancelledWaitSendsNothingAndKeepsNoRoom(t *testing.T) {
	l := New(Options{})
	epochs := acquireN(t, l, 2)
	l.release(epochs[0], http.StatusTooManyRequests) // cap 1.4, one in flight
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := l.acquire(ctx)
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); l.waitingLen() < 1; {
		if time.Now().After(deadline) {
			t.Fatal("request did not queue")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v, want context.Canceled", err)
	}
	l.release(epochs[1], http.StatusOK)
	// The room is free for the next request.
	acquireN(t, l, 1)
	if l.waitingLen() != 0 {
		t.Fatal("the cancelled request still waits")
	}
}

func TestGauges(t *testing.T) {
	var inFlight, capGauge gauge
	l := New(Options{InFlight: &inFlight, Cap: &capGauge})
	epochs := acquireN(t, l, 10)
	if inFlight.get() != 10 || capGauge.get() != 0 {
		t.Fatalf("gauges %v in flight, cap %v; want 10 and 0", inFlight.get(), capGauge.get())
	}
	l.release(epochs[0], http.StatusTooManyRequests)
	if inFlight.get() != 9 || capGauge.get() != 7 {
		t.Fatalf("gauges %v in flight, cap %v; want 9 and 7", inFlight.get(), capGauge.get())
	}
}

// TestRoundTripper checks what the transport counts: watches and Leases are
// never held, and a watch's 429 lowers the cap; other requests are held
// over it, and their bodies closed when a cancelled wait sends nothing.
func TestRoundTripper(t *testing.T) {
	next := &fakeTransport{codes: map[string]int{}}
	l := New(Options{})
	rt := l.RoundTripper(next)
	get := func(ctx context.Context, query string, body io.ReadCloser) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api/api/v1/configmaps?"+query, body)
		return rt.RoundTrip(req)
	}
	next.codes["watch=true"] = http.StatusTooManyRequests
	if _, err := get(context.Background(), "watch=true", nil); err != nil {
		t.Fatal(err)
	}
	if c, capped := l.Cap(); !capped || c != 1 {
		t.Fatalf("cap %v (capped %v) after a watch's 429 with nothing in flight, want 1", c, capped)
	}
	// One request in flight: a watch still goes, another request waits.
	next.block = make(chan struct{})
	started := make(chan struct{})
	next.started = started
	go func() { _, _ = get(context.Background(), "limit=1", nil) }()
	<-started
	next.started = nil
	watchCtx, cancelWatch := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelWatch()
	if _, err := get(watchCtx, "watch=1&resourceVersion=5", nil); err != nil {
		t.Fatalf("a watch was held: %v", err)
	}
	lease, _ := http.NewRequestWithContext(watchCtx, http.MethodPut, "https://api/apis/coordination.k8s.io/v1/namespaces/x/leases/metactl", nil)
	if _, err := rt.RoundTrip(lease); err != nil {
		t.Fatalf("a Lease's renewal was held: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	body := &closeRecorder{Reader: strings.NewReader("{}")}
	if _, err := get(ctx, "", body); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request over the cap returned %v, want the context's deadline", err)
	}
	if !body.closed {
		t.Fatal("the body of a request never sent was not closed")
	}
	close(next.block)
}

type fakeTransport struct {
	codes   map[string]int
	block   chan struct{}
	started chan struct{}
}

func (f *fakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.started != nil && req.URL.RawQuery == "limit=1" {
		close(f.started)
		<-f.block
	}
	code := http.StatusOK
	if c, ok := f.codes[req.URL.RawQuery]; ok {
		code = c
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(""))}, nil
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

type gauge struct {
	mu sync.Mutex
	v  float64
}

func (g *gauge) Set(v float64) { g.mu.Lock(); g.v = v; g.mu.Unlock() }
func (g *gauge) get() float64  { g.mu.Lock(); defer g.mu.Unlock(); return g.v }

func (l *Limiter) waitingLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting.Len()
}
