/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// sharedOnly is a controller's floor (Options.ResponseFloorBytes) too
// small for any answer of these tests, which test the shared part of the
// budget: the calls of one controller then use that part only.
const sharedOnly = 1

// waiting returns the number of calls waiting for room.
func (b *responseBudget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters
}

// until polls cond until it holds, failing the test after 10 seconds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var statusAnswer = hookfixture.StatusAnswer

// stalledAnswer serves the headers (Content-Length n) and the first byte
// of an answer, then stalls until release is closed, then sends the rest.
func stalledAnswer(n int, release <-chan struct{}) http.HandlerFunc {
	body := statusAnswer(n)
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = io.WriteString(w, body[:1])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, body[1:])
	}
}

func callSync(c *Client, ctx context.Context, hook string, timeout time.Duration) error {
	return callSyncWith(c, ctx, hook, timeout, CallOptions{})
}

// callSyncWith is callSync with opts.
func callSyncWith(c *Client, ctx context.Context, hook string, timeout time.Duration, opts CallOptions) error {
	h := urlHook(hook)
	if timeout > 0 {
		h.Webhook.Timeout = &metav1.Duration{Duration: timeout}
	}
	return c.Call(ctx, "c", "sync", h, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, opts)
}

// TestBudgetAnswerWaitsForRoom: an answer that does not fit beside the
// bytes other calls hold waits until they are released, then is read.
func TestBudgetAnswerWaitsForRoom(t *testing.T) {
	release := make(chan struct{})
	stalled := serve(t, stalledAnswer(6000, release))
	other := serve(t, answer(statusAnswer(6000)))
	c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 10000})

	first := make(chan error, 1)
	go func() { first <- callSync(c, context.Background(), stalled.URL, 0) }()
	until(t, "the stalled answer holds its 6000 bytes", func() bool { return c.ResponseBytesInFlight() == 6000 })

	second := make(chan error, 1)
	go func() { second <- callSync(c, context.Background(), other.URL, 0) }()
	until(t, "the second answer waits for room", func() bool { return c.budget.waiting() == 1 })
	select {
	case err := <-second:
		t.Fatalf("the second answer was read beside the first, beyond the budget (err %v)", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second call: %v", err)
	}
	if n := c.ResponseBytesInFlight(); n != 0 {
		t.Errorf("%d bytes still held after both calls", n)
	}
}

// TestBudgetWaitEndsWithTheCall: waiting for room ends at the hook's
// timeout, with a BudgetError that names the flag (and the call is
// observed without the wait), or when the caller gives up, with the
// caller's error.
func TestBudgetWaitEndsWithTheCall(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stalled := serve(t, stalledAnswer(6000, release))
	other := serve(t, answer(statusAnswer(6000)))
	c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 10000})
	go func() { _ = callSync(c, context.Background(), stalled.URL, 0) }()
	until(t, "the stalled answer holds its bytes", func() bool { return c.ResponseBytesInFlight() == 6000 })

	var observed []time.Duration
	c.metrics = ObserverFunc(func(_, _ string, _ int, d time.Duration) { observed = append(observed, d) })
	err := callSync(c, context.Background(), other.URL, 200*time.Millisecond)
	var be *BudgetError
	if !errors.As(err, &be) || !errors.Is(err, context.DeadlineExceeded) || IsUnreachable(err) {
		t.Fatalf("err = %v, want a BudgetError for the hook's timeout, not an UnreachableError", err)
	}
	if be.Controller != "c" || be.Hook != "sync" || be.Need == 0 || be.Budget != 10000 {
		t.Errorf("BudgetError %+v", be)
	}
	if len(observed) != 1 || observed[0] >= 200*time.Millisecond {
		t.Errorf("observed %v, want one call whose duration leaves out the 200ms waited for room", observed)
	}
	for _, want := range []string{"200ms", "--hook-response-budget-bytes", "10000 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "unreachable") {
		t.Errorf("message %q calls a hook that answered unreachable", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- callSync(c, ctx, other.URL, time.Minute) }()
	until(t, "the call waits for room", func() bool { return c.budget.waiting() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || IsUnreachable(err) {
		t.Fatalf("err = %v, want context.Canceled and not UnreachableError", err)
	}
	if n := c.ResponseBytesInFlight(); n != 6000 {
		t.Errorf("%d bytes held, want the stalled call's 6000 only", n)
	}
}

// TestBudgetRefusesAnswerLargerThanBudget: an answer that could never fit
// (in seven eighths of the budget, the rest being kept for small answers)
// is refused as too large, at once, whether its length is known or not.
func TestBudgetRefusesAnswerLargerThanBudget(t *testing.T) {
	big := statusAnswer(3000)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"content-length", answer(big)},
		{"chunked", answerChunked(big, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.handler)
			c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 2000})
			err := callSync(c, context.Background(), srv.URL, 0)
			var re *ResponseError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), "limit of 1750 bytes") || !strings.Contains(err.Error(), "--hook-response-budget-bytes") {
				t.Fatalf("err = %v, want a ResponseError naming the budget", err)
			}
			if n := c.ResponseBytesInFlight(); n != 0 {
				t.Errorf("%d bytes still held", n)
			}
			// At the limit is fine.
			if err := callSync(c, context.Background(), serve(t, answer(statusAnswer(1750))).URL, 0); err != nil {
				t.Errorf("at the limit: %v", err)
			}
		})
	}
}

// TestBudgetSmallAnswerPassesLargeWaiter: a small answer that fits is read
// at once, even while a larger one waits for room.
func TestBudgetSmallAnswerPassesLargeWaiter(t *testing.T) {
	release := make(chan struct{})
	stalled := serve(t, stalledAnswer(6000, release))
	large := serve(t, answer(statusAnswer(6000)))
	small := serve(t, answer(statusAnswer(100)))
	c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 10000})
	first := make(chan error, 1)
	go func() { first <- callSync(c, context.Background(), stalled.URL, 0) }()
	until(t, "the stalled answer holds its bytes", func() bool { return c.ResponseBytesInFlight() == 6000 })
	waiter := make(chan error, 1)
	go func() { waiter <- callSync(c, context.Background(), large.URL, 0) }()
	until(t, "the large answer waits", func() bool { return c.budget.waiting() == 1 })
	if err := callSync(c, context.Background(), small.URL, 2*time.Second); err != nil {
		t.Fatalf("small answer behind a waiting large one: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

// TestBudgetChunkedAnswersDoNotDeadlock: many answers of unknown length
// growing at once never all wait for each other's bytes: every call
// completes, well within its timeout, and all bytes are released.
func TestBudgetChunkedAnswersDoNotDeadlock(t *testing.T) {
	const size = 64 << 10
	body := statusAnswer(size)
	var gate sync.WaitGroup
	const calls = 32
	gate.Add(calls)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// Each call's first chunk is sent, then every hook waits until
		// all have started: the calls grow their reservations together.
		_, _ = io.WriteString(w, body[:4096])
		w.(http.Flusher).Flush()
		gate.Done()
		gate.Wait()
		for i := 4096; i < len(body); i += 4096 {
			_, _ = io.WriteString(w, body[i:min(i+4096, len(body))])
			w.(http.Flusher).Flush()
		}
	})
	// Room for four whole answers; the first reservations of 32 calls
	// together are four times that.
	c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 4 * size, MaxResponseBytes: size, HTTPClient: &http.Client{Transport: NewTransport()}})
	errs := make(chan error, calls)
	for range calls {
		go func() { errs <- callSync(c, context.Background(), srv.URL, 10*time.Second) }()
	}
	for i := range calls {
		if err := <-errs; err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := c.ResponseBytesInFlight(); n != 0 {
		t.Errorf("%d bytes still held", n)
	}
}

// TestBudgetReleasedOnEveryPath: the bytes are given back whatever the
// outcome: a valid answer, an invalid one, a body cut short.
func TestBudgetReleasedOnEveryPath(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"valid":   answer(statusAnswer(500)),
		"invalid": answer(`{"status":"no"}`),
		"cut short": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, `{"children":[`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := NewClient(Options{})
			_ = callSync(c, context.Background(), serve(t, h).URL, 0)
			if n := c.ResponseBytesInFlight(); n != 0 {
				t.Errorf("%d bytes still held", n)
			}
		})
	}
	t.Run("timeout mid-read", func(t *testing.T) {
		for name, length := range map[string]string{"content-length": "100000", "chunked": ""} {
			c := NewClient(Options{})
			srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if length != "" {
					w.Header().Set("Content-Length", length)
				}
				_, _ = io.WriteString(w, `{"children":[`)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			held := make(chan int64, 1)
			go func() {
				// While the call waits for the rest of the body, its
				// bytes are held.
				deadline := time.Now().Add(5 * time.Second)
				for c.ResponseBytesInFlight() == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				held <- c.ResponseBytesInFlight()
			}()
			if err := callSync(c, context.Background(), srv.URL, 300*time.Millisecond); !IsUnreachable(err) {
				t.Fatalf("%s: err = %v, want a timeout", name, err)
			}
			if n := <-held; n == 0 {
				t.Fatalf("%s: nothing was held while reading", name)
			}
			if n := c.ResponseBytesInFlight(); n != 0 {
				t.Errorf("%s: %d bytes still held after the timeout", name, n)
			}
		}
	})
	t.Run("304 from the ETag cache", func(t *testing.T) {
		es := &etagServer{}
		srv := serve(t, es.handler)
		c := NewClient(Options{})
		for range 2 {
			if err := c.Call(context.Background(), "c", "sync", etagHook(srv.URL, 60), &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
				t.Fatal(err)
			}
			if n := c.ResponseBytesInFlight(); n != 0 {
				t.Errorf("%d bytes still held", n)
			}
		}
		if _, code := es.last(); code != http.StatusNotModified {
			t.Fatalf("the second call was answered %d, want 304", code)
		}
	})
}

// TestBudgetKeepsRoomForSmallAnswers: answers over 64 KiB leave an eighth
// of the budget free; answers of 64 KiB or less may use it.
func TestBudgetKeepsRoomForSmallAnswers(t *testing.T) {
	release := make(chan struct{})
	stalled := serve(t, stalledAnswer(800<<10, release))
	large := serve(t, answer(statusAnswer(100<<10)))
	small := serve(t, answer(statusAnswer(60<<10)))
	c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 1 << 20})
	first := make(chan error, 1)
	go func() { first <- callSync(c, context.Background(), stalled.URL, 0) }()
	until(t, "the stalled answer holds its bytes", func() bool { return c.ResponseBytesInFlight() == 800<<10 })
	waiter := make(chan error, 1)
	go func() { waiter <- callSync(c, context.Background(), large.URL, 0) }()
	until(t, "the large answer waits: it would use the last eighth", func() bool { return c.budget.waiting() == 1 })
	if err := callSync(c, context.Background(), small.URL, 2*time.Second); err != nil {
		t.Fatalf("small answer: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
}

// capturingResponse records, while its answer is decoded, the capacity
// of the buffer the answer was read into and the bytes the budget holds.
type capturingResponse struct {
	c             *Client
	cap, inFlight int64
}

func (r *capturingResponse) DecodeHookResponse(body []byte, _ v1alpha1.ResponseUnMarshallMode) error {
	r.cap, r.inFlight = int64(cap(body)), r.c.ResponseBytesInFlight()
	return nil
}

// TestBudgetCoversTheAnswersBuffer: the buffer an answer was read into,
// alive while it is decoded, is within what the budget holds for it, and
// an answer of unknown length that gets a final reservation of the whole
// limit is not read into a buffer of the limit's size.
func TestBudgetCoversTheAnswersBuffer(t *testing.T) {
	const size = 100 << 10
	body := statusAnswer(size)
	for name, h := range map[string]http.HandlerFunc{
		"content-length": answer(body),
		"chunked":        answerChunked(body, 10<<10),
	} {
		t.Run(name, func(t *testing.T) {
			// The limit is the main part: answers of unknown length
			// over 64 KiB reserve the whole limit at once.
			c := NewClient(Options{ResponseFloorBytes: sharedOnly, ResponseBudgetBytes: 8 << 20, MaxResponseBytes: 16 << 20})
			if c.budget.growCap != 0 {
				t.Fatalf("growCap %d, want 0", c.budget.growCap)
			}
			resp := &capturingResponse{c: c}
			if err := c.Call(context.Background(), "c", "sync", urlHook(serve(t, h).URL), &hooks.CompositeSyncRequest{}, resp, CallOptions{}); err != nil {
				t.Fatal(err)
			}
			if resp.cap > resp.inFlight {
				t.Errorf("the answer's buffer holds %d bytes, the budget only %d", resp.cap, resp.inFlight)
			}
			if resp.cap > 2*size {
				t.Errorf("an answer of %d bytes was read into a buffer of %d", size, resp.cap)
			}
		})
	}
}
