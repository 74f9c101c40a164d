package elastic

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// alive returns the number of idle runners of p, in a bubble where every
// goroutine is blocked (after synctest.Wait): it hands each idle runner a
// function that blocks, until none takes one, then releases them, idle
// again.
func alive(p *Pool) int {
	n := 0
	release := make(chan struct{})
	for {
		select {
		case p.handoff <- func() { <-release }:
			n++
			continue
		default:
		}
		break
	}
	close(release)
	synctest.Wait()
	return n
}

func TestAnIdleRunnerIsReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Second)
		defer func() { p.Close(); p.Wait() }()
		ran := 0
		p.Go(func() { ran++ })
		synctest.Wait() // the runner ran the first and waits for work
		if got := alive(p); got != 1 {
			t.Fatalf("%d runners idle after one function, want 1", got)
		}
		p.Go(func() { ran++ })
		synctest.Wait()
		if got := alive(p); got != 1 {
			t.Errorf("%d runners idle after two functions in turn, want 1: the second started a runner", got)
		}
		if ran != 2 {
			t.Errorf("ran %d functions, want 2", ran)
		}
	})
}

func TestBusyRunnersGetCompany(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Second)
		defer func() { p.Close(); p.Wait() }()
		release := make(chan struct{})
		var running atomic.Int32
		for range 3 {
			p.Go(func() { running.Add(1); <-release })
		}
		synctest.Wait()
		if got := running.Load(); got != 3 {
			t.Fatalf("%d functions running, want all 3 at once", got)
		}
		close(release)
		synctest.Wait()
		if got := alive(p); got != 3 {
			t.Errorf("%d runners idle, want the 3 started", got)
		}
	})
}

func TestIdleRunnersExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Second)
		p.Go(func() {})
		synctest.Wait()
		time.Sleep(999 * time.Millisecond) // the bubble's clock
		synctest.Wait()
		if got := alive(p); got != 1 {
			t.Fatalf("%d runners idle before the idle timeout, want 1", got)
		}
		time.Sleep(2 * time.Second) // alive gave the runner work
		synctest.Wait()
		if got := alive(p); got != 0 {
			t.Errorf("%d runners idle after the idle timeout, want 0", got)
		}
		p.Wait() // returns: no runner is left
	})
}

func TestCloseEndsRunnersOnceTheirFunctionReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(time.Hour)
		release := make(chan struct{})
		p.Go(func() {})
		p.Go(func() { <-release })
		synctest.Wait()
		p.Close()
		p.Close() // idempotent
		waited := make(chan struct{})
		go func() { p.Wait(); close(waited) }()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("Wait returned while a function ran")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-waited:
		default:
			t.Fatal("Wait did not return once the last function returned")
		}
	})
}
