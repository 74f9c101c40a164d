/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultMinResponseBytesPerSecond is the default of
// Options.MinResponseBytesPerSecond: the slowest an answer's body may
// come once it has room in the budget, after DefaultResponseGrace.
const DefaultMinResponseBytesPerSecond int64 = 1 << 20

// DefaultResponseGrace is the default of Options.ResponseGrace: the time
// an answer's body may take beyond its bytes at the least rate.
const DefaultResponseGrace = 5 * time.Second

// errSlowBody is the cause with which a call's request is cancelled when
// its body missed its deadline (pace).
var errSlowBody = errors.New("the answer's body came too slowly")

// pace is the deadline of one answer's body: it must be read whole within
// grace plus its reserved bytes at rate, counted from when it first had
// room, without the time it waited for more room (which is metactl's, not
// the hook's). When it passes, cancel cancels the call's request (whose
// body read then fails) with errSlowBody, so that a body that stalls
// holds its room in the budget no longer than that, whatever the hook's
// timeout.
type pace struct {
	rate   int64
	grace  time.Duration
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	timer  *time.Timer
	start  time.Time     // when the body first had room; zero before
	paused time.Duration // waited for more room since
	held   int64         // the bytes reserved, as of the last arm
}

// allowed returns the time a body of held bytes may take.
func (p *pace) allowed(held int64) time.Duration {
	return p.grace + time.Duration(float64(held)/float64(p.rate)*float64(time.Second))
}

// arm sets the deadline for a body of held bytes: the first call starts
// the clock.
func (p *pace) arm(held int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		p.start = time.Now()
	}
	p.held = held
	d := time.Until(p.start.Add(p.paused + p.allowed(held)))
	if p.timer == nil {
		p.timer = time.AfterFunc(d, func() { p.cancel(errSlowBody) })
		return
	}
	p.timer.Reset(d)
}

// pause stops the clock while the call waits for more room; the function
// it returns starts it again for a body of held bytes.
func (p *pace) pause() func(held int64) {
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	since := time.Now()
	return func(held int64) {
		p.mu.Lock()
		p.paused += time.Since(since)
		p.mu.Unlock()
		p.arm(held)
	}
}

// stop ends the clock; the body is read, or its read failed.
func (p *pace) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
}

// slowBodyError is the cause of an UnreachableError when an answer's body
// missed the deadline of pace.
type slowBodyError struct {
	read, held int64
	allowed    time.Duration
	rate       int64
}

func (e *slowBodyError) Error() string {
	return fmt.Sprintf("the answer's body came too slowly: %d of its %d bytes in %s, the most it may take at the least rate of %d bytes per second (--hook-response-min-bytes-per-second, after a grace of --hook-response-grace); metactl gave back its room in the budget of hook answers: make the hook send its answer once it has started it",
		e.read, e.held, e.allowed.Round(time.Millisecond), e.rate)
}

func (e *slowBodyError) Timeout() bool { return true }
