package children

import "time"

// runnerIdleTimeout is how long a runner waits for another write before it
// exits.
const runnerIdleTimeout = 2 * time.Second

// runners runs the writes of every Manage call on goroutines that outlive
// one write. A write (an HTTP request, JSON in and out) needs tens of KB of
// stack; a goroutine started for each write begins with a small stack and
// grows it, copying it each time, while a runner keeps what it grew for the
// next write. In the benchmark's create phase that copying was 9% of
// metactl's CPU.
//
// run waits while MaxWritesInFlight writes run, then hands f to an idle
// runner or starts a new one; so the number of runners follows the number
// of writes in flight, at most MaxWritesInFlight, and idle ones exit after
// runnerIdleTimeout. Safe for concurrent use.
var runners = newRunnerPool(MaxWritesInFlight)

// MaxWritesInFlight bounds the child writes in flight in the process, over
// every Manage call of every controller. Hundreds of syncs may wait on
// their hooks at once (see internal/loop.DefaultWorkers); their writes go
// to one API server, which takes no more writes a second from more than
// this many at once, while each write in flight holds a goroutine with
// tens of KB of stack and its request and answer.
const MaxWritesInFlight = 128

type runnerPool struct {
	// tasks is unbuffered: a send succeeds only when a runner is idle.
	tasks chan func()
	// slots holds a token per write in flight.
	slots chan struct{}
}

// newRunnerPool returns a pool that runs at most limit functions at once.
func newRunnerPool(limit int) *runnerPool {
	return &runnerPool{tasks: make(chan func()), slots: make(chan struct{}, limit)}
}

// run runs f on an idle runner, or on a new one, once fewer than
// MaxWritesInFlight writes run.
func (p *runnerPool) run(f func()) {
	p.slots <- struct{}{}
	select {
	case p.tasks <- f:
	default:
		go p.runner(f)
	}
}

func (p *runnerPool) runner(f func()) {
	idle := time.NewTimer(runnerIdleTimeout)
	defer idle.Stop()
	for {
		f()
		<-p.slots
		idle.Reset(runnerIdleTimeout)
		select {
		case f = <-p.tasks:
		case <-idle.C:
			return
		}
	}
}
