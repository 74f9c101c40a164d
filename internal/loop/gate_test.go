package loop

import (
	"sync"
	"testing"
	"time"
)

// TestGateServesResumingFirst: with one turn held, a sync about to start
// and then a resuming one wait; the turn goes to the resuming one first.
func TestGateServesResumingFirst(t *testing.T) {
	g := newGate(NewShare(1), 1)
	g.acquire(false)
	var (
		mu    sync.Mutex
		order []string
	)
	waiter := func(name string, resuming bool) {
		g.acquire(resuming)
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		g.release()
	}
	waiters := func() (int, int) {
		g.share.mu.Lock()
		defer g.share.mu.Unlock()
		return len(g.starting), len(g.resuming)
	}
	until := func(cond func() bool, what string) {
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 5s: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); waiter("starting", false) }()
	until(func() bool { s, _ := waiters(); return s == 1 }, "the starting sync waits")
	go func() { defer wg.Done(); waiter("resuming", true) }()
	until(func() bool { _, r := waiters(); return r == 1 }, "the resuming sync waits")
	g.release()
	wg.Wait()
	if len(order) != 2 || order[0] != "resuming" {
		t.Errorf("turns went to %v, want the resuming sync first", order)
	}
	if g.share.free != 1 {
		t.Errorf("%d turns free after all returned, want 1", g.share.free)
	}
}

// TestWindowAdapts: the window opens by one for each resume that waited
// less for its turn than on its hook, up to max, and closes by a quarter
// for each that waited as long or longer, down to min.
func TestWindowAdapts(t *testing.T) {
	w := newWindow(4, 10)
	if w.limit != 4 {
		t.Fatalf("limit %d at start, want min 4", w.limit)
	}
	for range 20 {
		w.resumed(time.Millisecond, 100*time.Millisecond)
	}
	if w.limit != 10 {
		t.Errorf("limit %d after 20 free resumes, want max 10", w.limit)
	}
	w.resumed(10*time.Millisecond, time.Millisecond)
	if w.limit != 8 {
		t.Errorf("limit %d after a waited resume from 10, want 8", w.limit)
	}
	for range 10 {
		w.resumed(time.Millisecond, time.Millisecond)
	}
	if w.limit != 4 {
		t.Errorf("limit %d after many waited resumes, want min 4", w.limit)
	}
}

// TestWindowBoundsInFlight: acquire waits while the limit is reached and
// goes on when a sync is released or the window opens.
func TestWindowBoundsInFlight(t *testing.T) {
	w := newWindow(1, 2)
	w.acquire()
	got := make(chan struct{})
	go func() { w.acquire(); close(got) }()
	select {
	case <-got:
		t.Fatal("a second sync got in with limit 1")
	case <-time.After(50 * time.Millisecond):
	}
	w.resumed(0, time.Millisecond) // opens to 2
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the window opened but the waiting sync did not get in")
	}
}
