// Package elastic runs functions on goroutines that outlive one function:
// a Pool hands each function to an idle runner goroutine, or starts a new
// one when none is idle, and a runner idle for the pool's idle timeout
// exits. The number of runners so follows the number of functions in
// flight, and an idle pool holds none.
//
// It is what the sync workers of internal/loop and the child writers of
// pkg/dynamic/children share. A goroutine started per function begins
// with a small stack and grows it, copying it each time; a runner keeps
// the stack it grew for the next function. (In the benchmark's create
// phase, goroutines started per child write spent 9% of metactl's CPU on
// that copying.)
//
// Guarantees: Go never blocks and never runs f on the caller's goroutine;
// the functions it is given run at once, each on its own runner, however
// many are given; the pool does not bound them (its callers do, each its
// own way). A runner runs one function at a time, and takes another only
// once the previous returned. After Close, idle runners exit and busy ones
// exit once their function returns; Wait returns once all have exited. A
// Pool is safe for concurrent use, and imports nothing of metactl.
package elastic
