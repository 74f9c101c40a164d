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
// run never blocks: it hands f to an idle runner or starts a new one, so
// the number of runners follows the number of writes in flight (which
// Manage bounds), and idle ones exit after runnerIdleTimeout. Safe for
// concurrent use.
var runners = &runnerPool{tasks: make(chan func())}

type runnerPool struct {
	// tasks is unbuffered: a send succeeds only when a runner is idle.
	tasks chan func()
}

// run runs f on an idle runner, or on a new one.
func (p *runnerPool) run(f func()) {
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
		idle.Reset(runnerIdleTimeout)
		select {
		case f = <-p.tasks:
		case <-idle.C:
			return
		}
	}
}
