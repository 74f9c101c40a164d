/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// hookCall names one call: the controller, the hook and the webhook's URL
// without credentials. Messages name the hook and the URL only: the
// caller names the controller (in an Event, a log line or a condition on
// the controller itself), so that it is named once.
type hookCall struct {
	Controller string
	Hook       string
	URL        string
}

func (c hookCall) prefix() string {
	return fmt.Sprintf("%s hook %s", c.Hook, c.URL)
}

// UnreachableError is returned when the hook could not be reached or did
// not answer in time: a refused connection, a DNS failure, a TLS failure
// (for example an untrusted certificate), the hook's timeout, a failure to
// read the response body, or a connection the hook closed or reset before
// its answer was complete (see ClosedByHook).
type UnreachableError struct {
	// Controller and Hook name the call; URL is the webhook address
	// with its user information and query values redacted (redact.URL).
	Controller, Hook, URL string
	// Err is the cause.
	Err error
}

func (e *UnreachableError) Error() string {
	var (
		closed *closedError
		slow   *slowBodyError
	)
	if errors.As(e.Err, &closed) || errors.As(e.Err, &slow) {
		// The hook was reached: "unreachable" would mislead.
		return hookCall{e.Controller, e.Hook, e.URL}.prefix() + ": " + e.Err.Error()
	}
	return hookCall{e.Controller, e.Hook, e.URL}.prefix() + ": unreachable: " + e.Err.Error()
}

// ClosedByHook reports whether the hook closed or reset the connection
// before its answer was complete, as a hook that crashes while handling
// the request does.
func (e *UnreachableError) ClosedByHook() bool {
	var closed *closedError
	return errors.As(e.Err, &closed)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Timeout reports whether the hook did not answer within its timeout.
func (e *UnreachableError) Timeout() bool {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// timeoutError is the cause of an UnreachableError when the hook's timeout
// ran out.
type timeoutError struct {
	timeout time.Duration
	phase   string
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("no %s within the hook timeout of %s", e.phase, e.timeout)
}

func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }
func (e *timeoutError) Timeout() bool { return true }

// closedError is the cause of an UnreachableError when the hook closed or
// reset the connection before its answer was complete.
type closedError struct {
	// body is true when the answer had started (status line and headers
	// were read) and its body was cut short.
	body bool
	err  error
}

func (e *closedError) Error() string {
	msg := "the hook closed the connection without answering (did it crash?)"
	if e.body {
		msg = "the hook closed the connection before the end of its answer (did it crash?)"
	}
	// A bare EOF adds nothing; a reset says how the connection ended.
	if e.err != io.EOF && e.err != io.ErrUnexpectedEOF {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *closedError) Unwrap() error { return e.err }

// closedByPeer reports whether err, from sending a request or reading its
// response, means that the other end closed or reset the connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// MaxStatusErrorBody is the most of a non-200 response body a StatusError
// keeps.
const MaxStatusErrorBody = 1024

// MaxRetryAfter caps the delay taken from a Retry-After header.
const MaxRetryAfter = 24 * time.Hour

// StatusError is returned when the hook answered with an HTTP status other
// than 200.
type StatusError struct {
	// Controller and Hook name the call; URL is the webhook address
	// with its user information and query values redacted (redact.URL).
	Controller, Hook, URL string
	// Code is the HTTP status code.
	Code int
	// Body is the start of the response body, at most MaxStatusErrorBody
	// bytes, as valid UTF-8.
	Body string
	// Location is, for a redirect (301, 302, 303, 307 or 308), where it
	// points, redacted as URL is; empty for other codes and for a
	// redirect without a Location. metactl does not follow redirects.
	Location string
	// RetryAfter is the delay a 429 response asked for with a Retry-After
	// header (seconds or an HTTP date), capped at MaxRetryAfter. It is 0
	// for other codes, when the header is missing or invalid, and when it
	// asks for no delay (0 seconds or a date in the past).
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	msg := hookCall{e.Controller, e.Hook, e.URL}.prefix() + ": HTTP " + strconv.Itoa(e.Code)
	if text := http.StatusText(e.Code); text != "" {
		msg += " " + text
	}
	if e.RetryAfter > 0 {
		msg += " (retry after " + e.RetryAfter.String() + ")"
	}
	if isRedirect(e.Code) {
		if e.Location != "" {
			msg += " to " + e.Location
		}
		msg += ": metactl does not follow redirects: point the controller at the final URL"
	}
	if e.Body != "" {
		msg += ": " + strconv.Quote(e.Body)
	}
	return msg
}

// ResponseError is returned when the hook answered 200 with a body that is
// not a valid response: too large, not JSON, with unknown fields in strict
// mode, a status that is not an object, or an invalid child.
type ResponseError struct {
	// Controller and Hook name the call; URL is the webhook address
	// with its user information and query values redacted (redact.URL).
	Controller, Hook, URL string
	// Err says what is wrong.
	Err error
}

func (e *ResponseError) Error() string {
	return hookCall{e.Controller, e.Hook, e.URL}.prefix() + ": invalid response: " + e.Err.Error()
}

func (e *ResponseError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err is, or wraps, an *UnreachableError.
func IsUnreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u)
}

// RetryAfterDelay returns the delay of a 429 with a valid Retry-After
// header, and whether e is one. (It makes e an internal/loop.DelayedRetry:
// the loop then retries the sync after that delay, not its backoff.)
func (e *StatusError) RetryAfterDelay() (time.Duration, bool) {
	if e.Code == http.StatusTooManyRequests && e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return 0, false
}

// parseRetryAfter reads a Retry-After header: a number of seconds or an
// HTTP date. It returns 0 for a missing, invalid or past value.
func parseRetryAfter(value string, now time.Time) time.Duration {
	if value == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(value, 10, 64); err == nil {
		if secs > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	// The date has a resolution of one second: round up, so that the
	// delay does not end before the moment the hook named.
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return min(d, MaxRetryAfter)
}

// BudgetError is returned by Call when the hook answered but its answer
// found no room in the budget of all hook answers
// (Options.ResponseBudgetBytes) within the hook's timeout: other answers,
// of any controller, held it. The hook is not at fault; the caller retries
// with backoff like any failed call.
type BudgetError struct {
	Controller string
	Hook       string
	URL        string // redacted
	// Need is the bytes the answer waited for; Budget the budget's size;
	// Floor each controller's own room beside it
	// (Options.ResponseFloorBytes or Options.DecodedFloorBytes).
	Need, Budget, Floor int64
	// Timeout is the hook's timeout, which ended the wait.
	Timeout time.Duration
	// Flag is the flag that sets the budget: --hook-response-budget-bytes
	// (the answers' bytes, the default when empty) or
	// --hook-decoded-budget-bytes (their decoded objects).
	Flag string
	// Err is the context's error.
	Err error
}

func (e *BudgetError) Error() string {
	if e.Flag == "--hook-decoded-budget-bytes" {
		return fmt.Sprintf("%s: no room for the answer's %d bytes, decoded, within the hook timeout of %s: decoded hook answers of all controllers together may take at most %d bytes at once (%s), and it did not fit beside this controller's other answers in the controller's own %d bytes (--hook-decoded-floor-bytes): raise either flag (and metactl's memory limit with it), or make the hook's answers smaller",
			hookCall{e.Controller, e.Hook, e.URL}.prefix(), e.Need, e.Timeout, e.Budget, e.Flag, e.Floor)
	}
	return fmt.Sprintf("%s: no room for the answer's %d bytes within the hook timeout of %s: hook answers of all controllers together may hold at most %d bytes at once (--hook-response-budget-bytes), and it did not fit beside this controller's other calls in the controller's own %d bytes (--hook-response-floor-bytes): raise either flag (and metactl's memory limit with it), or make the hook's answers smaller",
		hookCall{e.Controller, e.Hook, e.URL}.prefix(), e.Need, e.Timeout, e.Budget, e.Floor)
}

func (e *BudgetError) Unwrap() error { return e.Err }

// CallError is an error of a TransportResolver or RequestPreparer that
// names the call it failed (*credentials.CredentialError is one): Call
// returns, wrapped, what ForCall gives for the call's controller and hook.
type CallError interface {
	error
	ForCall(controller, hook string) error
}
