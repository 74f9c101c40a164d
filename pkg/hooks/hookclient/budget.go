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

// responseBudget bounds the bytes of hook answers that all the calls of a
// Client hold at once, from the first read of a body until its answer is
// decoded and the raw bytes are released.
//
// It has two parts: the main part (seven eighths) for any answer and the
// reserve (an eighth) for answers of at most smallAnswer bytes, so that
// small answers are read while large ones fill the main part. A
// reservation is in one part.
//
// A call whose answer has a Content-Length reserves it whole before
// reading, holding nothing while it waits; a call without one reserves as
// it reads, doubling. Waiting while holding could deadlock (every holder
// waiting for another's bytes), so the calls that may still wait hold
// together at most growCap of the main part (main-limit), and once they
// cannot grow within that (or within the reserve) they wait for the rest
// of limit at once in the main part, after which they never wait again.
// The calls that never wait again always finish (or time out) and
// release, and then limit or more of the main part is free: enough for
// any one waiter.
//
// A waiter is served as soon as what it asks for is free, not in arrival
// order: a small answer is not held up behind a large one that waits for
// room (a large one waits at most its hook's timeout).
type responseBudget struct {
	size    int64 // the budget
	main    int64 // its part for any answer: size - size/8
	reserve int64 // its part for small answers only: size/8
	limit   int64 // the largest answer: min(Options.MaxResponseBytes, main)
	growCap int64 // the most of main that calls that may still wait hold together

	room           // guards the fields below
	usedMain int64 // reserved in the main part
	usedRes  int64 // reserved in the reserve
	growing  int64 // of usedMain, by calls that may still wait
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

func newResponseBudget(size, maxBody int64) *responseBudget {
	b := &responseBudget{size: size, reserve: size / 8, room: newRoom()}
	b.main = size - b.reserve
	b.limit = min(maxBody, b.main)
	b.growCap = b.main - b.limit
	return b
}

// inFlight returns the bytes reserved now.
func (b *responseBudget) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usedMain + b.usedRes
}

// reservation is one call's part of the budget. Its zero value (with b
// set) holds nothing.
type reservation struct {
	b    *responseBudget
	held int64
	// inReserve is true when held is in the reserve, not the main part.
	inReserve bool
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

// reserveAll reserves n bytes, all the call will need: it waits until
// they are free. The reservation must hold nothing.
func (r *reservation) reserveAll(ctx context.Context, n int64) error {
	b := r.b
	return b.wait(ctx, &r.waited, func() bool {
		switch {
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
// reserve, or within growCap of the main part, when either has room; else,
// once the main part has room for the whole limit, to limit, after which
// it never waits again.
func (r *reservation) growTo(ctx context.Context, n int64) error {
	b := r.b
	return b.wait(ctx, &r.waited, func() bool {
		more := n - r.held
		switch {
		case !r.inReserve && b.usedMain+more <= b.main && b.growing+more <= b.growCap:
			b.usedMain += more
			b.growing += more
			r.held = n
		case (r.inReserve || r.held == 0) && n <= smallAnswer && b.usedRes+more <= b.reserve:
			b.usedRes += more
			r.held, r.inReserve = n, true
		case r.inReserve && b.usedMain+b.limit <= b.main:
			b.usedRes -= r.held
			b.notifyLocked()
			b.usedMain += b.limit
			r.held, r.inReserve, r.final = b.limit, false, true
		case !r.inReserve && b.usedMain+b.limit-r.held <= b.main:
			b.usedMain += b.limit - r.held
			b.growing -= r.held
			r.held, r.final = b.limit, true
		default:
			return false
		}
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
// (Need and Budget set), and a failed read the reader's error.
func (c *Client) readBody(ctx context.Context, body io.Reader, contentLength int64, buf *bytes.Buffer, r *reservation) error {
	limit := c.budget.limit
	if contentLength > limit {
		return errTooLarge
	}
	if contentLength >= 0 {
		if err := r.reserveAll(ctx, contentLength); err != nil {
			return &BudgetError{Need: contentLength, Budget: c.budget.size, Err: err}
		}
	} else if err := r.growTo(ctx, min(firstReservation, limit)); err != nil {
		return &BudgetError{Need: min(firstReservation, limit), Budget: c.budget.size, Err: err}
	}
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
			if err := r.growTo(ctx, next); err != nil {
				return &BudgetError{Need: next, Budget: c.budget.size, Err: err}
			}
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
