/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"sync"
	"time"
)

// DefaultDecodedBudgetBytes is the default of Options.DecodedBudgetBytes:
// the most memory the objects decoded from hook answers may take at once,
// all controllers together, as decodedSize estimates it.
const DefaultDecodedBudgetBytes int64 = 64 << 20

// The estimate of decodedSize, per JSON element, in bytes beyond the
// element's own text: measured by decoding answers of several shapes
// (ConfigMaps with long values, Secrets with many short keys, Deployments,
// lists of numbers, lists of one-key objects) with encoding/json into
// map[string]any and reading the live heap after a collection. The
// estimate is at or above the measure for each: objects with long strings
// cost their bytes, many small values cost far more (a list of `{"a":0}`
// about 43 times its text, a Deployment about 13 times).
const (
	decodedPerObject = 320 // a map and its buckets
	decodedPerArray  = 32  // a slice header and its interface
	decodedPerValue  = 40  // a string, number, literal or key: its interface, header or boxed number, and its slot in a growing slice or map
)

// decodedSize estimates the memory the objects decoded from the JSON text
// body take once decoded: its length, plus the per-element costs above.
// It reads body once, without allocating; it does not check that body is
// valid JSON (the decoder does).
func decodedSize(body []byte) int64 {
	n := int64(len(body))
	inString, escaped, inScalar := false, false, false
	for _, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString, inScalar = true, false
			n += decodedPerValue
		case '{':
			inScalar = false
			n += decodedPerObject
		case '[':
			inScalar = false
			n += decodedPerArray
		case ',', ':', '}', ']', ' ', '\t', '\r', '\n':
			inScalar = false
		default: // a number or literal starts, or goes on
			if !inScalar {
				inScalar = true
				n += decodedPerValue
			}
		}
	}
	return n
}

// decodedBudget bounds the estimated memory (decodedSize) of the answers
// whose decoded objects are in use: from decoding until the call returns,
// or, for calls under HoldAnswers, until the caller is done with them.
//
// A call acquires its answer's part while it holds the raw bytes' part of
// the response budget; it never holds a part of this budget while waiting
// for either (a hold is given back as the next call under the same context
// begins), so its holders always go on and release, and a waiter whose
// part is at most the budget's size is served once they have. A waiter is
// served as soon as its part is free, not in arrival order.
type decodedBudget struct {
	size int64

	room       // guards used
	used int64 // taken now
}

func newDecodedBudget(size int64) *decodedBudget {
	return &decodedBudget{size: size, room: newRoom()}
}

// acquire waits until n bytes are free and takes them, or returns ctx's
// error. n must be at most the budget's size.
func (b *decodedBudget) acquire(ctx context.Context, n int64) error {
	var waited time.Duration
	return b.wait(ctx, &waited, func() bool {
		if b.used+n > b.size {
			return false
		}
		b.used += n
		return true
	})
}

// release gives back n bytes.
func (b *decodedBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.notifyLocked()
}

// inUse returns the bytes taken now.
func (b *decodedBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// answerHold keeps, for the calls made under one context, the part of the
// decoded budget the last answer decoded under it took (see HoldAnswers).
type answerHold struct {
	mu sync.Mutex
	b  *decodedBudget
	n  int64
}

type answerHoldKey struct{}

// HoldAnswers returns a context under which Client.Call keeps the part of
// the decoded budget (Options.DecodedBudgetBytes) an answer it decoded
// took, after it returns, until the next Call under that context begins
// or release is called, instead of giving it back as it returns: the
// objects decoded from an answer stay live while the caller writes them.
// internal/engine holds the answers of each sync until the sync ends.
//
// A context holds at most one answer: a Call under it first gives back
// what the previous one kept, so that a call waiting for room never holds
// any. A caller that uses several answers at once (the answers of a
// rolling update's revisions) is counted for the last one only. release
// must be called once the answers are no longer used; calling it again
// does nothing.
func HoldAnswers(ctx context.Context) (context.Context, func()) {
	h := &answerHold{}
	return context.WithValue(ctx, answerHoldKey{}, h), h.release
}

// heldAnswers returns the hold of ctx, or nil.
func heldAnswers(ctx context.Context) *answerHold {
	h, _ := ctx.Value(answerHoldKey{}).(*answerHold)
	return h
}

// release gives back what h keeps. A nil h keeps nothing.
func (h *answerHold) release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.b != nil {
		h.b.release(h.n)
	}
	h.b, h.n = nil, 0
}

// keep takes over n bytes of b, giving back what h kept before.
func (h *answerHold) keep(b *decodedBudget, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.b != nil {
		h.b.release(h.n)
	}
	h.b, h.n = b, n
}
