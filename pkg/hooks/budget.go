/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// DefaultResponseBudgetBytes is the default of Options.ResponseBudgetBytes:
// the most bytes of hook answers held in memory at once, all controllers
// together. With the ETag cache's default (DefaultEtagCacheMaxBytes) it
// leaves most of the shipped Deployment's 256 MiB memory limit to the
// informer caches and to the objects decoded from answers.
const DefaultResponseBudgetBytes int64 = 64 << 20

// firstReservation is the budget an answer of unknown length (sent
// chunked, without Content-Length) reserves before its first read; the
// reservation doubles as the answer turns out longer.
const firstReservation = 32 << 10

// responseBudget bounds the bytes of hook answers that all the calls of a
// Client hold at once, from the first read of a body until its answer is
// decoded and the raw bytes are released.
//
// A call whose answer has a Content-Length reserves it whole before
// reading, holding nothing while it waits; a call without one reserves as
// it reads, doubling. Waiting while holding could deadlock (every holder
// waiting for another's bytes), so the budget keeps one answer's worth
// (limit) out of reach of those calls that may still wait: what they hold
// together stays within size-limit, and once they must wait, they wait for
// the rest of limit at once, after which they never wait again. The calls
// that never wait again always finish (or time out) and release, and then
// size-limit or more is free: enough for any one waiter.
//
// A waiter is served as soon as what it asks for is free, not in arrival
// order: a small answer is not held up behind a large one that waits for
// room (a large one waits at most its hook's timeout).
type responseBudget struct {
	size  int64 // the budget
	limit int64 // the largest answer: min(Options.MaxResponseBytes, size)

	mu      sync.Mutex
	used    int64         // reserved, all calls together
	growing int64         // reserved by calls that may still wait
	waiters int           // calls waiting for room
	freed   chan struct{} // closed when bytes are released while calls wait
}

func newResponseBudget(size, maxBody int64) *responseBudget {
	return &responseBudget{size: size, limit: min(size, maxBody), freed: make(chan struct{})}
}

// inFlight returns the bytes reserved now.
func (b *responseBudget) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// reservation is one call's part of the budget. Its zero value (with b
// set) holds nothing.
type reservation struct {
	b    *responseBudget
	held int64
	// final is true once the call reserved all it will need and never
	// waits again.
	final bool
}

// wait blocks until ok (called with b.mu held) reports that the request
// fits, and returns with b.mu held; or returns ctx's error, without it.
func (b *responseBudget) wait(ctx context.Context, ok func() bool) error {
	b.mu.Lock()
	for !ok() {
		if err := ctx.Err(); err != nil {
			b.mu.Unlock()
			return err
		}
		b.waiters++
		freed := b.freed
		b.mu.Unlock()
		var err error
		select {
		case <-freed:
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		b.waiters--
		if err != nil {
			b.mu.Unlock()
			return err
		}
	}
	return nil
}

// reserveAll reserves n bytes, all the call will need: it waits until
// they are free. The reservation must hold nothing.
func (r *reservation) reserveAll(ctx context.Context, n int64) error {
	b := r.b
	if err := b.wait(ctx, func() bool { return b.used+n <= b.size }); err != nil {
		return err
	}
	b.used += n
	b.mu.Unlock()
	r.held, r.final = n, true
	return nil
}

// growTo raises the reservation to n bytes (at most limit). Without
// waiting when that keeps what calls that may wait hold within
// size-limit; else it waits for the rest of limit, all at once, and never
// waits again.
func (r *reservation) growTo(ctx context.Context, n int64) error {
	b := r.b
	b.mu.Lock()
	if more := n - r.held; b.used+more <= b.size && b.growing+more <= b.size-b.limit {
		b.used += more
		b.growing += more
		b.mu.Unlock()
		r.held = n
		return nil
	}
	b.mu.Unlock()
	more := b.limit - r.held
	if err := b.wait(ctx, func() bool { return b.used+more <= b.size }); err != nil {
		return err
	}
	b.used += more
	b.growing -= r.held
	b.mu.Unlock()
	r.held, r.final = b.limit, true
	return nil
}

// shrinkTo gives back what the call reserved beyond n bytes (what it
// read): a final reservation of the whole limit keeps only what it needs
// while its answer is decoded.
func (r *reservation) shrinkTo(n int64) {
	if n >= r.held {
		return
	}
	r.b.mu.Lock()
	r.b.used -= r.held - n
	if !r.final {
		r.b.growing -= r.held - n
	}
	r.b.notifyLocked()
	r.b.mu.Unlock()
	r.held = n
}

// release gives back the whole reservation.
func (r *reservation) release() {
	if r.held == 0 {
		return
	}
	r.shrinkTo(0)
}

func (b *responseBudget) notifyLocked() {
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
}

// budgetWaitError is the cause of an UnreachableError when a call's
// answer found no room in the budget within the hook's timeout.
type budgetWaitError struct {
	timeout time.Duration // set by Call
	need    int64
	budget  int64
	err     error // the context's
}

func (e *budgetWaitError) Error() string {
	return fmt.Sprintf("no room for the answer's %d bytes within the hook timeout of %s: hook answers of all controllers together may hold at most %d bytes at once (--hook-response-budget-bytes)", e.need, e.timeout, e.budget)
}

func (e *budgetWaitError) Unwrap() error { return e.err }
func (e *budgetWaitError) Timeout() bool { return errors.Is(e.err, context.DeadlineExceeded) }

// errTooLarge is returned by readBody for an answer over the limit.
var errTooLarge = errors.New("answer too large")

// readBody reads body into buf, reserving from the budget what it reads
// before reading it: all of contentLength when it is known (>= 0), else in
// doubling steps. An answer over the limit gives errTooLarge, a ctx done
// while waiting for room a *budgetWaitError, and a failed read the
// reader's error.
func (c *Client) readBody(ctx context.Context, body io.Reader, contentLength int64, buf *bytes.Buffer, r *reservation) error {
	limit := c.budget.limit
	if contentLength > limit {
		return errTooLarge
	}
	if contentLength >= 0 {
		if err := r.reserveAll(ctx, contentLength); err != nil {
			return &budgetWaitError{need: contentLength, budget: c.budget.size, err: err}
		}
	} else if err := r.growTo(ctx, min(firstReservation, limit)); err != nil {
		return &budgetWaitError{need: min(firstReservation, limit), budget: c.budget.size, err: err}
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
				return &budgetWaitError{need: next, budget: c.budget.size, err: err}
			}
			buf.Grow(int(r.held) - buf.Len())
			buf.WriteByte(probe[0])
			continue
		}
		room := int(r.held) - buf.Len()
		buf.Grow(room)
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
