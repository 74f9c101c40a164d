/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// DefaultResponseBudgetBytes is the default of Options.ResponseBudgetBytes:
// the most bytes of hook answers as read (raw JSON) held in memory at
// once, all controllers together, from the first read of a body until it
// is decoded. The objects decoded from the answers, which take from about
// as much as an answer's text to over 40 times it, are bounded by the
// decoded budget (DefaultDecodedBudgetBytes). See docs/security.md,
// section 4.
const DefaultResponseBudgetBytes int64 = 32 << 20

// firstReservation is the budget an answer of unknown length (sent
// chunked, without Content-Length) reserves before its first read; the
// reservation doubles as the answer turns out longer.
const firstReservation = 32 << 10

// smallAnswer is the largest answer that may use the budget's reserve: an
// eighth of the budget that larger answers cannot use, so that
// controllers with small answers keep working while large answers fill
// the rest.
const smallAnswer = 64 << 10

// DefaultResponseFloorBytes is the default of Options.ResponseFloorBytes:
// each controller's own room for its hook answers, beside the shared
// budget, which no other controller's calls can take.
const DefaultResponseFloorBytes int64 = 256 << 10

// responseBudget bounds the bytes of hook answers that all the calls of a
// Client hold at once, from the first read of a body until its answer is
// decoded and the raw bytes are released.
//
// It has a floor per controller and a shared part. A controller's floor
// (floor bytes) is used by its own calls only: a call takes its room
// there when it fits beside what the controller's other calls hold, else
// in the shared part, so that whatever other controllers hold, a
// controller's answers of up to floor bytes always find room once its own
// calls release theirs. Floors are counted only while used: the budget
// holds at most size plus floor per controller reading an answer.
//
// The shared part (size) has two parts: the main part (seven eighths)
// for any answer and the reserve (an eighth) for answers of at most
// smallAnswer bytes, so that small answers are read while large ones fill
// the main part. A reservation is in one part: a floor, the main part or
// the reserve.
//
// A call whose answer has a Content-Length reserves it whole before
// reading, holding nothing while it waits; a call without one reserves as
// it reads, doubling. Waiting while holding could deadlock (every holder
// waiting for another's bytes), so the calls that may still wait hold
// together at most growCap of the main part (main-limit), and once they
// cannot grow within that (or within the reserve, or their floor) they
// wait for the rest of limit at once in the main part, after which they
// never wait again. The calls that never wait again always finish (or
// time out, or are cut off by the rule on slow bodies) and release, and
// then limit or more of the main part is free: enough for any one waiter.
// A call that waits while holding part of its floor holds nothing any
// other call of the shared part waits for.
//
// A waiter is served as soon as what it asks for is free, not in arrival
// order: a small answer is not held up behind a large one that waits for
// room (a large one waits at most its hook's timeout).
type responseBudget struct {
	size    int64 // the shared budget
	main    int64 // its part for any answer: size - size/8
	reserve int64 // its part for small answers only: size/8
	limit   int64 // the largest answer: min(Options.MaxResponseBytes, main)
	growCap int64 // the most of main that calls that may still wait hold together
	floor   int64 // each controller's own room

	room                       // guards the fields below
	usedMain  int64            // reserved in the main part
	usedRes   int64            // reserved in the reserve
	growing   int64            // of usedMain, by calls that may still wait
	floors    map[string]int64 // reserved in each controller's floor; no entry when none
	usedFloor int64            // reserved in all floors
}

// room is how calls wait for room in a budget: mu guards the budget's
// counts; a call that finds no room waits, without holding mu, until parts
// are released (notifyLocked) or its context ends.
type room struct {
	mu      sync.Mutex
	waiters int           // calls waiting
	freed   chan struct{} // closed, and replaced, when parts are released while calls wait
}

func newRoom() room { return room{freed: make(chan struct{})} }

func newResponseBudget(size, maxBody, floor int64) *responseBudget {
	b := &responseBudget{size: size, reserve: size / 8, floor: floor, floors: map[string]int64{}, room: newRoom()}
	b.main = size - b.reserve
	b.limit = min(maxBody, b.main)
	b.growCap = b.main - b.limit
	return b
}

// inFlight returns the bytes reserved now, floors included.
func (b *responseBudget) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usedMain + b.usedRes + b.usedFloor
}

// inShared returns the bytes reserved now in the shared part.
func (b *responseBudget) inShared() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usedMain + b.usedRes
}

// reservation is one call's part of the budget. Its zero value (with b
// and controller set) holds nothing.
type reservation struct {
	b *responseBudget
	// controller is the calling controller, whose floor the call may use.
	controller string
	held       int64
	// inReserve is true when held is in the reserve; inFloor when it is
	// in the controller's floor; else it is in the main part.
	inReserve, inFloor bool
	// final is true once the call reserved all it will need and never
	// waits again.
	final bool
	// waited is how long the call waited for room.
	waited time.Duration
}

// wait blocks until try (called with b.mu held) reports that it took the
// part it needs, or returns ctx's error; it adds the time waited to
// waited.
func (b *room) wait(ctx context.Context, waited *time.Duration, try func() bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !try() {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.waiters++
		freed := b.freed
		b.mu.Unlock()
		start := time.Now()
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		*waited += time.Since(start)
		b.mu.Lock()
		b.waiters--
		if err != nil {
			return err
		}
	}
	return nil
}

// takeFloorLocked takes more bytes of the controller's floor when they
// fit; b.mu is held.
func (r *reservation) takeFloorLocked(more int64) bool {
	b := r.b
	if more == 0 {
		return true // no entry for nothing held
	}
	if b.floors[r.controller]+more > b.floor {
		return false
	}
	b.floors[r.controller] += more
	b.usedFloor += more
	return true
}

// giveFloorLocked gives back less bytes of the controller's floor; b.mu
// is held.
func (r *reservation) giveFloorLocked(less int64) {
	b := r.b
	if b.floors[r.controller] -= less; b.floors[r.controller] <= 0 {
		delete(b.floors, r.controller)
	}
	b.usedFloor -= less
}

// reserveAll reserves n bytes, all the call will need: it waits until
// they are free, in the controller's floor or the shared part. The
// reservation must hold nothing.
func (r *reservation) reserveAll(ctx context.Context, n int64) error {
	b := r.b
	return b.wait(ctx, &r.waited, func() bool {
		switch {
		case r.takeFloorLocked(n):
			r.inFloor = true
		case b.usedMain+n <= b.main:
			b.usedMain += n
		case n <= smallAnswer && b.usedRes+n <= b.reserve:
			b.usedRes += n
			r.inReserve = true
		default:
			return false
		}
		r.held, r.final = n, true
		return true
	})
}

// growTo raises the reservation to n bytes (at most limit): within the
// controller's floor, the reserve, or growCap of the main part, when
// either has room; else, once the main part has room for the whole limit,
// to limit, after which it never waits again. A reservation that moves
// from a floor or the reserve keeps its bytes there until it has moved.
func (r *reservation) growTo(ctx context.Context, n int64) error {
	b := r.b
	return b.wait(ctx, &r.waited, func() bool {
		inMain := r.held > 0 && !r.inFloor && !r.inReserve
		if (r.held == 0 || r.inFloor) && r.takeFloorLocked(n-r.held) {
			r.held, r.inFloor = n, true
			return true
		}
		var mainHeld, resHeld int64
		switch {
		case inMain:
			mainHeld = r.held
		case r.inReserve:
			resHeld = r.held
		}
		// leave gives back what the reservation holds in the floor or
		// the reserve, once it has room elsewhere.
		leave := func() {
			switch {
			case r.inFloor:
				r.giveFloorLocked(r.held)
			case r.inReserve:
				b.usedRes -= r.held
			default:
				return
			}
			r.inFloor, r.inReserve = false, false
			b.notifyLocked()
		}
		switch {
		case !r.inReserve && b.usedMain+n-mainHeld <= b.main && b.growing+n-mainHeld <= b.growCap:
			leave()
			b.usedMain += n - mainHeld
			b.growing += n - mainHeld
		case !inMain && n <= smallAnswer && b.usedRes+n-resHeld <= b.reserve:
			if r.inFloor {
				leave()
			}
			b.usedRes += n - resHeld
			r.inReserve = true
		case b.usedMain+b.limit-mainHeld <= b.main:
			leave()
			b.usedMain += b.limit - mainHeld
			b.growing -= mainHeld
			n, r.final = b.limit, true
		default:
			return false
		}
		r.held = n
		return true
	})
}

// shrinkTo gives back what the call reserved beyond n bytes (what it
// read): a final reservation of the whole limit keeps only what it needs
// while its answer is decoded.
func (r *reservation) shrinkTo(n int64) {
	if n >= r.held {
		return
	}
	b, less := r.b, r.held-n
	b.mu.Lock()
	switch {
	case r.inFloor:
		r.giveFloorLocked(less)
	case r.inReserve:
		b.usedRes -= less
	case r.final:
		b.usedMain -= less
	default:
		b.usedMain -= less
		b.growing -= less
	}
	b.notifyLocked()
	b.mu.Unlock()
	r.held = n
}

// release gives back the whole reservation.
func (r *reservation) release() {
	if r.held == 0 {
		return
	}
	r.shrinkTo(0)
}

// notifyLocked wakes the calls waiting, to try again; b.mu is held.
func (b *room) notifyLocked() {
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
}

// maxPooledBuffer is the largest answer buffer kept for reuse, so that one
// huge answer does not pin its memory for the life of the process.
const maxPooledBuffer = 1 << 20

// bufferPool holds the buffers answers are read into.
var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer {
	b := bufferPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuffer {
		return
	}
	bufferPool.Put(b)
}

// budgetError is the error of a call that waited in vain for need bytes
// of room, err the context's error.
func (c *Client) budgetError(need int64, err error) *BudgetError {
	return &BudgetError{Need: need, Budget: c.budget.size, Floor: c.budget.floor, Err: err}
}

// errTooLarge is returned by readBody for an answer over the limit.
var errTooLarge = errors.New("answer too large")

// readBody reads body into buf, reserving from the budget what it reads
// before reading it: all of contentLength when it is known (>= 0), else in
// doubling steps. buf's capacity never exceeds the reservation, so that
// the caller may account by it (shrinkTo(buf.Cap())): an answer of known
// length is read into a buffer of exactly its length, one of unknown
// length into one that doubles as it fills (a final reservation of the
// whole limit does not allocate the limit). An answer over the limit
// gives errTooLarge, a ctx done while waiting for room a *BudgetError
// (Need, Budget and Floor set), and a failed read the reader's error
// (the request's cancellation, with errSlowBody as its cause, when the
// body missed the deadline of p, which readBody keeps).
func (c *Client) readBody(ctx context.Context, body io.Reader, contentLength int64, buf *bytes.Buffer, r *reservation, p *pace) error {
	limit := c.budget.limit
	if contentLength > limit {
		return errTooLarge
	}
	if contentLength >= 0 {
		if err := r.reserveAll(ctx, contentLength); err != nil {
			return c.budgetError(contentLength, err)
		}
	} else if err := r.growTo(ctx, min(firstReservation, limit)); err != nil {
		return c.budgetError(min(firstReservation, limit), err)
	}
	p.arm(r.held)
	defer p.stop()
	if int64(buf.Cap()) > r.held {
		// A pooled buffer larger than the reservation would hold more
		// than it.
		*buf = bytes.Buffer{}
	}
	// grow makes room for at least one more byte, within the reservation.
	grow := func() {
		if buf.Available() > 0 {
			return
		}
		n := int(r.held)
		if contentLength < 0 {
			n = min(max(2*buf.Cap(), 4<<10), n)
		}
		b := make([]byte, buf.Len(), n)
		copy(b, buf.Bytes())
		*buf = *bytes.NewBuffer(b)
	}
	for {
		if int64(buf.Len()) == r.held {
			// The reservation is full: the answer may be complete. (A
			// body with a Content-Length normally ends with its last
			// bytes, never getting here.)
			var probe [1]byte
			n, err := io.ReadFull(body, probe[:])
			if n == 0 {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if r.held >= limit || contentLength >= 0 {
				return errTooLarge
			}
			next := min(2*r.held, limit)
			resume := p.pause()
			if err := r.growTo(ctx, next); err != nil {
				return c.budgetError(next, err)
			}
			resume(r.held)
			grow()
			buf.WriteByte(probe[0])
			continue
		}
		grow()
		room := min(buf.Available(), int(r.held)-buf.Len())
		p := buf.AvailableBuffer()[:room]
		n, err := body.Read(p)
		buf.Write(p[:n])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
