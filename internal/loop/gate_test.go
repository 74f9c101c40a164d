package loop

import (
	"sync"
	"testing"
	"time"
)

// TestGateServesResumingFirst: with one turn held, a sync about to start
// and then a resuming one wait; the turn goes to the resuming one first.
func TestGateServesResumingFirst(t *testing.T) {
	g := &gate{free: 1}
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
		g.mu.Lock()
		defer g.mu.Unlock()
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
	if g.free != 1 {
		t.Errorf("%d turns free after all returned, want 1", g.free)
	}
}
