package loop

import (
	"sync"
)

// A Share is a number of turns to run outside Sync.WhileWaiting (see
// Options.Active) that the loops given it (Options.Share) share: at most
// that many syncs of all of them together decode, check answers and
// write at once, each loop also at most its own Options.Active. One Share
// is the process's bound on its active syncs across controllers.
//
// The rule, when a turn frees and syncs of several loops wait for one:
// the turn goes to a sync of the loop that holds the fewest turns (below
// its own Active), and between loops that hold as many, to the one served
// least recently (round robin). Within a loop, a sync resuming from a wait
// comes before a sync about to start, each in order of arrival. So a
// loop with a hot queue (a hook asking for resyncs all the time, a
// failing hook retried, a slow hook whose many syncs resume at once)
// takes only turns that no loop holding fewer wants: a loop with few
// keys waits for at most one turn to free, whoever holds it, and while
// every loop wants more than it holds, the turns freed go to those
// holding fewest until each holds a fair part (the turns over the loops,
// within one). Free turns are never held back: a loop alone gets all it
// may use, so one controller runs as it would with a Share of its own.
// A sync waiting on its hook (Sync.WhileWaiting) holds no turn.
//
// A Share is safe for concurrent use.
type Share struct {
	mu   sync.Mutex
	free int
	// waiting are the gates with a waiter.
	waiting []*gate
	// grants numbers the turns given, in order.
	grants uint64
}

// NewShare returns a Share of turns turns; turns <= 0 means
// DefaultActive(), the default Active of one loop, so that the process
// runs at once as many active syncs as one controller may.
func NewShare(turns int) *Share {
	if turns <= 0 {
		turns = DefaultActive()
	}
	return &Share{free: turns}
}

// gate is one loop's part of a Share: at most limit turns held, and the
// loop's syncs waiting for one.
type gate struct {
	share *Share
	limit int
	held  int
	// served is the number of the Share's last grant to this gate (0:
	// none yet).
	served uint64
	// resuming and starting are the waiters, in order of arrival, as
	// channels closed to give them a turn.
	resuming, starting []chan struct{}
}

// newGate returns a gate of at most limit turns of share.
func newGate(share *Share, limit int) *gate {
	return &gate{share: share, limit: limit}
}

// acquire takes a turn, waiting for one if none may be had now; resuming
// says whether the caller resumes from a wait.
func (g *gate) acquire(resuming bool) {
	s := g.share
	s.mu.Lock()
	turn := make(chan struct{})
	if len(g.resuming) == 0 && len(g.starting) == 0 {
		s.waiting = append(s.waiting, g)
	}
	if resuming {
		g.resuming = append(g.resuming, turn)
	} else {
		g.starting = append(g.starting, turn)
	}
	s.grant()
	s.mu.Unlock()
	<-turn
}

// release gives a turn back to the Share, which hands it on (grant).
func (g *gate) release() {
	s := g.share
	s.mu.Lock()
	g.held--
	s.free++
	s.grant()
	s.mu.Unlock()
}

// grant hands out the free turns by the Share's rule. s.mu is held.
func (s *Share) grant() {
	for s.free > 0 {
		best := -1
		for i, g := range s.waiting {
			if g.held >= g.limit {
				continue
			}
			if best < 0 || fairer(g, s.waiting[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		g := s.waiting[best]
		var turn chan struct{}
		if len(g.resuming) > 0 {
			turn, g.resuming = g.resuming[0], g.resuming[1:]
		} else {
			turn, g.starting = g.starting[0], g.starting[1:]
		}
		if len(g.resuming) == 0 && len(g.starting) == 0 {
			s.waiting = append(s.waiting[:best], s.waiting[best+1:]...)
		}
		g.held++
		s.free--
		s.grants++
		g.served = s.grants
		close(turn)
	}
}

// fairer reports whether a is served before b: a holds fewer turns, or
// as many and was served less recently.
func fairer(a, b *gate) bool {
	if a.held != b.held {
		return a.held < b.held
	}
	return a.served < b.served
}
