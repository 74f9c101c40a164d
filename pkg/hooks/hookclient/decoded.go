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

// DefaultDecodedFloorBytes is the default of Options.DecodedFloorBytes:
// each controller's own room in the decoded budget, which no other
// controller's answers can take.
const DefaultDecodedFloorBytes int64 = 1 << 20

// decodedBudget bounds the estimated memory (decodedSize) of the answers
// whose decoded objects are in use: from decoding until the call returns,
// or, for calls with a Hold, until the caller is done with them.
//
// Like the response budget, it has a floor per controller (floor bytes),
// which the controller's answers use first and no other controller's can
// take, and a shared part (size); floors count only while used.
//
// A call acquires its answer's part while it holds the raw bytes' part of
// the response budget; it never holds a part of this budget while waiting
// for either (a Hold gives it back as the next call with the same Hold
// begins), so its holders always go on and release, and a waiter whose
// part is at most the budget's size is served once they have. A waiter is
// served as soon as its part is free, not in arrival order.
type decodedBudget struct {
	size  int64
	floor int64

	room                       // guards the fields below
	used      int64            // taken now in the shared part
	floors    map[string]int64 // taken now in each controller's floor; no entry when none
	usedFloor int64            // taken now in all floors
}

func newDecodedBudget(size, floor int64) *decodedBudget {
	return &decodedBudget{size: size, floor: floor, floors: map[string]int64{}, room: newRoom()}
}

// decodedPart is a part of the decoded budget that a call took.
type decodedPart struct {
	b          *decodedBudget
	controller string
	n          int64
	inFloor    bool
}

// acquire waits until n bytes are free, in controller's floor or the
// shared part, and takes them, or returns ctx's error. n must be at most
// the budget's size.
func (b *decodedBudget) acquire(ctx context.Context, controller string, n int64) (decodedPart, error) {
	var waited time.Duration
	p := decodedPart{b: b, controller: controller, n: n}
	err := b.wait(ctx, &waited, func() bool {
		switch {
		case n == 0: // nothing to take, and no entry for it
		case b.floors[controller]+n <= b.floor:
			b.floors[controller] += n
			b.usedFloor += n
			p.inFloor = true
		case b.used+n <= b.size:
			b.used += n
		default:
			return false
		}
		return true
	})
	return p, err
}

// release gives the part back.
func (p decodedPart) release() {
	if p.n == 0 {
		return
	}
	b := p.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.inFloor {
		if b.floors[p.controller] -= p.n; b.floors[p.controller] <= 0 {
			delete(b.floors, p.controller)
		}
		b.usedFloor -= p.n
	} else {
		b.used -= p.n
	}
	b.notifyLocked()
}

// inUse returns the bytes taken now, floors included.
func (b *decodedBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used + b.usedFloor
}

// CallOptions carry the state a Call shares with the other calls of the
// same caller (a sync): the zero value shares none.
type CallOptions struct {
	// Hold, when set, keeps the part of the decoded budget the call's
	// answer takes after the call returns (see Hold); nil: the call gives
	// it back as it returns.
	Hold *Hold
	// Retry marks the call as a retry: the sync that makes it runs again
	// after one that failed or waited. Only its span says so
	// (metactl.hook.retry).
	Retry bool
}

// Hold keeps, for the calls made with it (CallOptions.Hold), the part of
// the decoded budget (Options.DecodedBudgetBytes) the last answer decoded
// under it took, after its Call returns, until the next Call with the
// same Hold begins or Release is called, instead of giving it back as the
// call returns: the objects decoded from an answer stay live while the
// caller writes them. internal/engine holds the answers of each sync
// until the sync ends.
//
// A Hold holds at most one answer: a Call with it first gives back what
// the previous one kept, so that a call waiting for room never holds any.
// A caller that uses several answers at once (the answers of a rolling
// update's revisions) is counted for the last one only. Release must be
// called once the answers are no longer used; calling it again does
// nothing. The zero value is ready to use.
type Hold struct {
	mu   sync.Mutex
	part decodedPart
}

// NewHold returns an empty Hold.
func NewHold() *Hold { return &Hold{} }

// Release gives back what h keeps. A nil h keeps nothing.
func (h *Hold) Release() { h.release() }

// release gives back what h keeps. A nil h keeps nothing.
func (h *Hold) release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.part.release()
	h.part = decodedPart{}
}

// keep takes over part, giving back what h kept before.
func (h *Hold) keep(part decodedPart) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.part.release()
	h.part = part
}
