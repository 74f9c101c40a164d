package children

import (
	"time"

	"github.com/metactl/metactl/internal/elastic"
)

// runnerIdleTimeout is how long a runner waits for another write before it
// exits.
const runnerIdleTimeout = 2 * time.Second

// runners runs the writes of every Manage call on goroutines that outlive
// one write (an elastic.Pool). A write (an HTTP request, JSON in and out)
// needs tens of KB of stack; a goroutine started for each write begins
// with a small stack and grows it, copying it each time, while a runner
// keeps what it grew for the next write. In the benchmark's create phase
// that copying was 9% of metactl's CPU.
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
	pool *elastic.Pool
	// slots holds a token per write in flight.
	slots chan struct{}
}

// newRunnerPool returns a pool that runs at most limit functions at once.
func newRunnerPool(limit int) *runnerPool {
	return &runnerPool{pool: elastic.New(runnerIdleTimeout), slots: make(chan struct{}, limit)}
}

// run runs f on an idle runner, or on a new one, once fewer than
// the pool's limit of functions run.
func (p *runnerPool) run(f func()) {
	p.slots <- struct{}{}
	p.pool.Go(func() {
		f()
		<-p.slots
	})
}
