package main

import (
	"errors"
	"fmt"
)

// ExitError ends a command with an exit code other than 1, the code of
// any other error. The tools a hook author runs in CI say what they found
// by their code, as `terraform plan -detailed-exitcode` does: 0 nothing
// to report, 2 changes (differences, findings), 1 the tool itself failed.
type ExitError struct {
	// Code is the process's exit code.
	Code int
	// Err, when set, is printed as any command's error is; nil prints
	// nothing more (the command has printed its report).
	Err error
}

// ExitChanges is the code of a report with changes, differences or
// findings.
const ExitChanges = 2

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitCode is the process's exit code for err, the error a command
// returned: 0 for none, an ExitError's Code, else 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*ExitError](err); ok {
		return ee.Code
	}
	return 1
}
