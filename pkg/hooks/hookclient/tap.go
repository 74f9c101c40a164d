/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"bytes"
	"context"
	"time"
)

// Tap is told about the hook calls it chooses to record, with their
// bodies (internal/hookrecord's Recorder is one). It must be safe for
// concurrent use.
type Tap interface {
	// Recording reports whether the call about to be made under ctx is
	// recorded. It is asked on every call, before anything is copied,
	// and must be cheap: a call it declines costs nothing more.
	Recording(ctx context.Context) bool
	// Record is given each call Recording accepted that was sent, once
	// it is over; the TappedCall and its bytes are the Tap's to keep.
	Record(ctx context.Context, call *TappedCall)
}

// TappedCall is one hook call as a Tap is given it.
type TappedCall struct {
	// Controller and Hook name the call as Client.Call was given them.
	Controller, Hook string
	// Start is when the request was sent; Duration how long the hook took
	// to answer, as Options.Metrics is told.
	Start    time.Time
	Duration time.Duration
	// Request is the request body as sent.
	Request []byte
	// Code is the HTTP status of the answer; 0 when none came.
	Code int
	// Response is the answer's body when the hook answered 200, or, with
	// etag, the cached answer that a 304 or 412 stands for; nil
	// otherwise.
	Response []byte
	// Err is the call's error, as Call returns it; nil when it succeeded.
	Err error
}

// tapping is the record of one call a Tap accepted; nil when none did, and
// then each of its methods does nothing.
type tapping struct {
	call *TappedCall
	sent bool
}

// startTap returns the record of a call under ctx when c's Tap records it.
func (c *Client) startTap(ctx context.Context, controller, hookName string) *tapping {
	if c.tap == nil || !c.tap.Recording(ctx) {
		return nil
	}
	return &tapping{call: &TappedCall{Controller: controller, Hook: hookName}}
}

// request keeps a copy of the request body, about to be sent.
func (t *tapping) request(body []byte) {
	if t == nil {
		return
	}
	t.sent = true
	t.call.Start = time.Now()
	t.call.Request = bytes.Clone(body)
}

// answered keeps the answer's code and how long it took.
func (t *tapping) answered(code int, d time.Duration) {
	if t == nil {
		return
	}
	t.call.Code, t.call.Duration = code, d
}

// body keeps a copy of the answer's body.
func (t *tapping) body(b []byte) {
	if t == nil {
		return
	}
	t.call.Response = bytes.Clone(b)
}

// done gives the call, when it was sent, to tap, with its error.
func (t *tapping) done(ctx context.Context, tap Tap, err error) {
	if t == nil || !t.sent {
		return
	}
	t.call.Err = err
	tap.Record(ctx, t.call)
}
