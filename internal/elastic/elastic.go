package elastic

import (
	"sync"
	"time"
)

// Pool runs functions on runner goroutines that come and go with the
// work (see the package documentation).
type Pool struct {
	idleTimeout time.Duration
	// handoff passes a function to an idle runner; unbuffered, so a send
	// succeeds only when one is waiting.
	handoff chan func()
	// closed is closed by Close: idle runners exit.
	closed    chan struct{}
	closeOnce sync.Once
	// running counts the runners.
	running sync.WaitGroup
}

// New returns a Pool whose runners exit after idleTimeout without work.
func New(idleTimeout time.Duration) *Pool {
	return &Pool{idleTimeout: idleTimeout, handoff: make(chan func()), closed: make(chan struct{})}
}

// Go runs f on an idle runner, or on a new one when none is idle. It must
// not be called after Close.
func (p *Pool) Go(f func()) {
	select {
	case p.handoff <- f:
	default:
		p.running.Add(1)
		go p.runner(f)
	}
}

// Close makes the runners exit: the idle ones at once, the others once
// their function returns. It is idempotent.
func (p *Pool) Close() {
	p.closeOnce.Do(func() { close(p.closed) })
}

// Wait waits until every runner has exited: after Close, or once all have
// been idle for the idle timeout. As with a sync.WaitGroup, a call of Go
// that may start a runner must not race with Wait: call Wait after the
// last Go (typically after Close).
func (p *Pool) Wait() { p.running.Wait() }

// runner runs f, then the functions handed to it, until it has been idle
// for the idle timeout or the pool is closed.
func (p *Pool) runner(f func()) {
	defer p.running.Done()
	idle := time.NewTimer(p.idleTimeout)
	defer idle.Stop()
	for {
		f()
		idle.Reset(p.idleTimeout)
		select {
		case f = <-p.handoff:
		case <-idle.C:
			return
		case <-p.closed:
			return
		}
	}
}
