package children

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestRunnersReuseIdleGoroutines(t *testing.T) {
	p := newRunnerPool(4)
	var wg sync.WaitGroup
	ids := make(chan int64, 2)
	run := func() {
		wg.Add(1)
		p.run(func() {
			defer wg.Done()
			ids <- goroutineID()
		})
		wg.Wait()
	}
	run()
	if first, caller := <-ids, goroutineID(); first == caller {
		t.Fatal("the write ran on the caller's goroutine")
	} else {
		ids <- first
	}
	// The first runner is idle now, or about to be: the second write goes
	// to it once it waits for work.
	deadline := time.Now().Add(5 * time.Second)
	first := <-ids
	for {
		run()
		if second := <-ids; second == first {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("every write ran on a new goroutine")
		}
	}
}

// goroutineID parses the running goroutine's ID from its stack header.
func goroutineID() int64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	var id int64
	fmt.Sscanf(string(buf), "goroutine %d ", &id)
	return id
}

// TestRunnersBoundWritesInFlight: with a limit of 2, a third function
// waits until one of the first two returns.
func TestRunnersBoundWritesInFlight(t *testing.T) {
	p := newRunnerPool(2)
	release := make(chan struct{})
	started := make(chan int, 3)
	for i := range 2 {
		p.run(func() { started <- i; <-release })
	}
	<-started
	<-started
	third := make(chan struct{})
	go func() {
		p.run(func() { started <- 2 })
		close(third)
	}()
	select {
	case <-third:
		t.Fatal("a third function was started while two ran, limit 2")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-third:
	case <-time.After(5 * time.Second):
		t.Fatal("the third function did not start after the first two returned")
	}
	if got := <-started; got != 2 {
		t.Errorf("started %d, want the third", got)
	}
}
