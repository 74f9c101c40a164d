package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/hooks"
)

// The engine's error types, and what tells them apart (syncReason reads a
// sync's error into a reason of reasons.go).

// invalidAnswerError marks an answer of a hook that metactl's checks
// refused: nothing of it was applied. Its message is its cause's.
type invalidAnswerError struct{ Err error }

func (e *invalidAnswerError) Error() string { return e.Err.Error() }
func (e *invalidAnswerError) Unwrap() error { return e.Err }

// InvalidAnswer marks err, a refusal of a hook's answer, as an
// *invalidAnswerError; nil stays nil.
func InvalidAnswer(err error) error {
	if err == nil {
		return nil
	}
	return &invalidAnswerError{Err: err}
}

// writeError marks the failure of a write to the API server by a sync.
// Its message is its cause's.
type writeError struct{ Err error }

func (e *writeError) Error() string { return e.Err.Error() }
func (e *writeError) Unwrap() error { return e.Err }

// WriteFailed marks err, the failure of a write, as a *writeError; nil
// stays nil.
func WriteFailed(err error) error {
	if err == nil {
		return nil
	}
	return &writeError{Err: err}
}

// refusedAnswerError is returned for an answer without its list of
// children (attachments) while the object has some, or with a key that
// likely misspells it, unless the controller reads a missing list as an
// empty one.
type refusedAnswerError struct {
	// Hook is the hook's name; List, Resource and Annotation as in
	// Answers.
	Hook, List, Resource, Annotation string
	// Observed is how many children (attachments) the object has.
	Observed int
	// Unknown are the answer's unknown keys.
	Unknown []hooks.UnknownField
	// Invalid is the annotation's value when it is neither
	// AbsentListRefuse nor AbsentListEmpty.
	Invalid *string
}

func (e *refusedAnswerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s hook answer refused: it has no %q list", e.Hook, e.List)
	if len(e.Unknown) > 0 {
		keys := make([]string, len(e.Unknown))
		for i, f := range e.Unknown {
			keys[i] = f.String()
		}
		fmt.Fprintf(&b, " (it has %s)", strings.Join(keys, ", "))
	}
	if e.Observed > 0 {
		fmt.Fprintf(&b, ", and reading that as an empty list would delete all its %s (%d); the answer was not applied. "+
			"A hook that means to delete them all answers %q: []. ",
			e.List, e.Observed, e.List)
	} else {
		fmt.Fprintf(&b, ", and a key that likely misspells it: reading that as an empty list would create none of the %s it asks for; the answer was not applied. "+
			"Fix the key (a hook that means none answers %q: []). ",
			e.List, e.List)
	}
	fmt.Fprintf(&b, "To read a missing %q as an empty list, as metacontroller does, annotate the %s with %s=%s",
		e.List, e.Resource, e.Annotation, AbsentListEmpty)
	if e.Invalid != nil {
		fmt.Fprintf(&b, " (its value %s is not one of %q, %q)", strconv.Quote(*e.Invalid), AbsentListRefuse, AbsentListEmpty)
	}
	return b.String()
}

// isRefusedAnswer reports whether err is, or wraps, a *refusedAnswerError.
func isRefusedAnswer(err error) bool {
	var r *refusedAnswerError
	return errors.As(err, &r)
}

// InvalidSpecError reports a controller object whose spec is invalid.
type InvalidSpecError struct{ Errs field.ErrorList }

func (e *InvalidSpecError) Error() string { return e.Errs.ToAggregate().Error() }

// statusTooLargeError reports a status the hook answered for an object
// whose status is kept in StatusAnnotation that exceeds
// MaxStatusAnnotationBytes as JSON. The annotation keeps the status it had.
type statusTooLargeError struct {
	Size, Max int
}

func (e *statusTooLargeError) Error() string {
	return fmt.Sprintf("the status the hook answered is %d bytes as JSON, more than the %d bytes the %s annotation holds; the object keeps its previous status",
		e.Size, e.Max, StatusAnnotation)
}

// RequestTooLargeError fails a sync whose hook request would carry more
// bytes of objects than one sync may send (Options.MaxRequestBytes, or
// the half of the request budget one controller may hold), counted
// before any of them was decoded or sent: the sync (or finalize) hook was
// not called and nothing was written for the sync (the customize hook may
// have been, before its related objects were counted).
type RequestTooLargeError struct {
	// What is what the count had reached when it went over ("children of
	// configmaps", "related objects").
	What string
	// Bytes are the bytes counted so far, Limit the limit, Flag the
	// setting that sets it.
	Bytes, Limit int64
	Flag         string
}

func (e *RequestTooLargeError) Error() string {
	return fmt.Sprintf("the hook request would carry at least %d bytes of objects (counted up to the %s), more than the limit of %d bytes per sync (%s); "+
		"the sync hook was not called and nothing was written: select fewer or smaller children or related objects "+
		"(a narrower selector or customize rule), or ask the platform to raise %s",
		e.Bytes, e.What, e.Limit, e.Flag, e.Flag)
}

// RequestBudgetError fails a sync that found no room in the process's
// request budget (RequestBudget) within its wait: the syncs of all
// controllers together held too much. It is retried with backoff.
type RequestBudgetError struct {
	// Bytes is what the sync asked for, Held what it held already,
	// ControllerHeld what its controller's syncs held together.
	Bytes, Held, ControllerHeld int64
	// Budget is the budget's size, Share what one controller may hold.
	Budget, Share int64
	Wait          time.Duration
}

func (e *RequestBudgetError) Error() string {
	return fmt.Sprintf("no room within %v for %d more bytes of objects for the hook request (the sync held %d, its controller %d): "+
		"the hook requests of all controllers together may hold %d bytes at once and one controller %d (--hook-request-budget-bytes); "+
		"retried with backoff; if it persists, ask the platform to raise --hook-request-budget-bytes (and the memory limit with it)",
		e.Wait, e.Bytes, e.Held, e.ControllerHeld, e.Budget, e.Share)
}

// errNotSettled is returned by a sync whose hook was still asking for
// writes after MaxRounds calls. It wraps loop.ErrWaiting: the object is
// synced again with backoff, and the failure is reported once by Unsettled,
// not as a SyncError on every retry.
var errNotSettled = fmt.Errorf("the hook did not reach a fixed point in %d calls: %w", MaxRounds, loop.ErrWaiting)

// IsNotSettled reports whether err is errNotSettled.
func IsNotSettled(err error) bool { return errors.Is(err, errNotSettled) }

// onlyConflicts reports whether err is a conflict (the retry resolves it)
// and nothing else: unlike apierrors.IsConflict, an error that joins a
// conflict with another failure (errors.Join) is not, so that the other
// failure is reported; nor is a conflict that a retry does not resolve
// (loop.RefusedConflict: an apply refused for fields other managers own).
func onlyConflicts(err error) bool {
	var refused loop.RefusedConflict
	if err == nil || errors.As(err, &refused) {
		return false
	}
	if st, ok := err.(apierrors.APIStatus); ok {
		return st.Status().Reason == metav1.StatusReasonConflict
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		errs := u.Unwrap()
		for _, e := range errs {
			if !onlyConflicts(e) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return onlyConflicts(u.Unwrap())
	}
	return false
}
