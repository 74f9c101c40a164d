/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import "strings"

// EventsError is CheckEvents' refusal of an answer's events. Its message
// is its cause's. Decoding returns it inside a *ResponseError, but a sync
// reports it as an invalid answer (metactl's checks refused it), not as a
// failed hook.
type EventsError struct{ Err error }

func (e *EventsError) Error() string { return e.Err.Error() }
func (e *EventsError) Unwrap() error { return e.Err }

// strictError lists the problems strict mode found (unknown or duplicate
// fields).
type strictError []error

func (e strictError) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return "strict mode: " + strings.Join(msgs, "; ")
}

func (e strictError) Unwrap() []error { return e }
