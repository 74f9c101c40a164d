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

	"github.com/metactl/metactl/pkg/hooks"
)

// callAs calls hook as the sync hook of controller, with the hook's
// timeout.
func callAs(c *Client, ctx context.Context, controller, hook string, timeout time.Duration) error {
	h := urlHook(hook)
	h.Webhook.Timeout = &metav1.Duration{Duration: timeout}
	return c.Call(ctx, controller, "sync", h, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
}

// smallestAnswer is a 27-byte answer.
const smallestAnswer = `{"status":{},"children":[]}`

// stallAttack makes controller "attacker" fill the shared budget of c's
// default size with answers that announce their length and stall: two of
// 14 MiB (the main part) and 64 of 64 KiB (the reserve). It returns once
// they hold all of it; the calls end with the test.
func stallAttack(t *testing.T, c *Client) {
	t.Helper()
	release := make(chan struct{})
	big := serve(t, stalledAnswer(14<<20, release))
	small := serve(t, stalledAnswer(64<<10, release))
	ctx, cancel := context.WithCancel(context.Background())
	var calls sync.WaitGroup
	// Cleanups run last in, first out: the servers close after this.
	t.Cleanup(func() {
		cancel()
		close(release)
		calls.Wait()
	})
	attack := func(url string, n int) {
		for range n {
			calls.Go(func() { _ = callAs(c, ctx, "attacker", url, v1alphaMaxTimeout) })
		}
	}
	attack(big.URL, 2)
	until(t, "the two large answers hold the main part", func() bool { return c.ResponseBytesInFlight() >= 28<<20 })
	attack(small.URL, 64)
	until(t, "the attacker holds the whole shared budget", func() bool { return c.ResponseBytesInFlight() >= DefaultResponseBudgetBytes })
}

// v1alphaMaxTimeout is the longest hook timeout a controller object may
// set (v1alpha1.MaxHookTimeout): what an attacker chooses.
const v1alphaMaxTimeout = 5 * time.Minute

// TestShareStallingHookCannotStarveAnotherController is the attack of
// issue 32 on the client with default budgets: a hook that announces
// large Content-Lengths and stalls holds the whole shared budget; another
// controller's 27-byte answer is still read at once, from its own floor.
func TestShareStallingHookCannotStarveAnotherController(t *testing.T) {
	c := NewClient(Options{})
	stallAttack(t, c)
	good := serve(t, answer(smallestAnswer))
	// Well within its timeout: the answer does not wait for room.
	const timeout = 2 * time.Second
	for i := range 3 {
		start := time.Now()
		err := callAs(c, context.Background(), "good", good.URL, timeout)
		var be *BudgetError
		if errors.As(err, &be) {
			t.Fatalf("call %d: the other controller's 27-byte answer found no room: %v", i, err)
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if d := time.Since(start); d > timeout/2 {
			t.Errorf("call %d took %v: it waited for room", i, d)
		}
	}
}

// TestShareFloorIsUsedFirstAndMovedFrom: a controller's calls take their
// room in its own floor first, then in the shared part; an answer sent
// chunked that outgrows the floor moves to the shared part and gives the
// floor back; everything is given back as the calls end.
func TestShareFloorIsUsedFirstAndMovedFrom(t *testing.T) {
	const floor = 64 << 10
	c := NewClient(Options{ResponseFloorBytes: floor})
	release := make(chan struct{})
	inFloor := serve(t, stalledAnswer(floor, release))
	calls := make(chan error, 2)
	go func() { calls <- callAs(c, context.Background(), "a", inFloor.URL, time.Minute) }()
	until(t, "the first answer holds the floor", func() bool { return c.ResponseBytesInFlight() == floor })
	if n := c.ResponseBytesShared(); n != 0 {
		t.Fatalf("an answer that fits the floor holds %d bytes of the shared part", n)
	}
	go func() { calls <- callAs(c, context.Background(), "a", inFloor.URL, time.Minute) }()
	until(t, "the second answer holds room in the shared part", func() bool { return c.ResponseBytesShared() == floor })
	close(release)
	for range 2 {
		if err := <-calls; err != nil {
			t.Fatal(err)
		}
	}

	// Chunked: 32 KiB in the floor, then 64 KiB, then out of it.
	grown := make(chan struct{})
	chunked := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		body := statusAnswer(256 << 10)
		_, _ = io.WriteString(w, body[:100<<10])
		w.(http.Flusher).Flush()
		<-grown
		_, _ = io.WriteString(w, body[100<<10:])
	})
	go func() { calls <- callAs(c, context.Background(), "a", chunked.URL, time.Minute) }()
	until(t, "the chunked answer moved out of the floor", func() bool {
		return c.ResponseBytesShared() > 0 && c.ResponseBytesInFlight() == c.ResponseBytesShared()
	})
	close(grown)
	if err := <-calls; err != nil {
		t.Fatal(err)
	}
	if n := c.ResponseBytesInFlight(); n != 0 {
		t.Errorf("%d bytes still held after the calls", n)
	}
}

// TestPaceStallingBodyGivesBackItsRoom: an answer's body that stalls
// fails the call, as the hook's, once it is late for its bytes at the
// least rate after the grace, long before the hook's timeout, and its
// room is given back; a body that comes at the rate is read whole.
func TestPaceStallingBodyGivesBackItsRoom(t *testing.T) {
	const (
		size  = 1 << 20
		rate  = 4 << 20
		grace = 300 * time.Millisecond
		// The body's deadline: grace plus its bytes at the rate.
		allowed = grace + time.Second/4
	)
	c := NewClient(Options{MinResponseBytesPerSecond: rate, ResponseGrace: grace})
	release := make(chan struct{})
	defer close(release)
	stalled := serve(t, stalledAnswer(size, release))
	for _, controller := range []string{"a", "b"} {
		start := time.Now()
		err := callAs(c, context.Background(), controller, stalled.URL, v1alphaMaxTimeout)
		took := time.Since(start)
		var ue *UnreachableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "came too slowly") {
			t.Fatalf("err = %v, want an UnreachableError saying the body came too slowly", err)
		}
		t.Logf("after %v: %v", took.Round(time.Millisecond), err)
		if took < allowed {
			t.Errorf("the call failed after %v, before its body's deadline of %v", took, allowed)
		}
		// Bounded by the claim's own deadline, with room for a loaded
		// machine; the hook's timeout is 5 minutes.
		if took > allowed+10*time.Second {
			t.Errorf("the call failed after %v, long after its body's deadline of %v", took, allowed)
		}
		if n := c.ResponseBytesInFlight(); n != 0 {
			t.Errorf("%d bytes still held after the stalled call", n)
		}
	}
	// Sent at twice the rate, in pieces: read whole.
	steady := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		body := statusAnswer(size)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		const piece = 64 << 10
		for i := 0; i < len(body); i += piece {
			_, _ = io.WriteString(w, body[i:min(i+piece, len(body))])
			w.(http.Flusher).Flush()
			time.Sleep(time.Second * piece / (2 * rate))
		}
	})
	if err := callAs(c, context.Background(), "a", steady.URL, time.Minute); err != nil {
		t.Errorf("an answer sent at twice the least rate: %v", err)
	}
}

// TestShareDecodedFloor: a controller whose syncs hold all of the
// decoded budget (their Holds not released) cannot make another
// controller's small answer wait: it is decoded within that controller's
// own floor of the decoded budget.
func TestShareDecodedFloor(t *testing.T) {
	const budget = 4 << 20
	c := NewClient(Options{DecodedBudgetBytes: budget})
	small := decodedSize([]byte(smallestAnswer))
	// statusAnswer(n) decodes to about n+760 bytes: leave less room than
	// the small answer needs.
	n := int(budget - small - 760 + 1)
	if got := decodedSize([]byte(statusAnswer(n))); got != budget-small+1 {
		t.Fatalf("the attacker's answer is estimated at %d bytes, want %d", got, budget-small+1)
	}
	big := serve(t, answer(statusAnswer(n)))
	// Larger than a floor: held in the shared part, until released.
	hold := NewHold()
	defer hold.Release()
	h := urlHook(big.URL)
	if err := c.Call(context.Background(), "attacker", "sync", h, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	good := serve(t, answer(smallestAnswer))
	err := callAs(c, context.Background(), "good", good.URL, time.Second)
	if err != nil {
		t.Fatalf("the other controller's small answer: %v", err)
	}
	// Long enough to read the 4 MiB answer on a loaded machine first.
	if err := callAs(c, context.Background(), "attacker", big.URL, 2*time.Second); !errors.As(err, new(*BudgetError)) {
		t.Errorf("the attacker's second large answer: err = %v, want a BudgetError: the shared part is held", err)
	}
}

// TestShareFloorsKeepNoEntryForNothing: the floors keep an entry per
// controller only while it holds something, so that the controllers that
// come and go leave none, an empty answer's included.
func TestShareFloorsKeepNoEntryForNothing(t *testing.T) {
	c := NewClient(Options{})
	empty := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "0")
	})
	small := serve(t, answer(smallestAnswer))
	for _, url := range []string{small.URL, empty.URL} {
		// The empty answer is invalid: what matters is what it leaves.
		_ = callAs(c, context.Background(), "gone", url, time.Minute)
	}
	c.budget.mu.Lock()
	floors := len(c.budget.floors)
	c.budget.mu.Unlock()
	c.decoded.mu.Lock()
	decoded := len(c.decoded.floors)
	c.decoded.mu.Unlock()
	if floors != 0 || decoded != 0 {
		t.Errorf("entries left: %d in the response floors, %d in the decoded floors; want none", floors, decoded)
	}
}
