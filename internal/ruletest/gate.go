package ruletest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/engine"
)

// Gate is a fake engine.Gate: it admits (Admits) and begins (Begin) the
// syncs of the namespaces it is told to, records the namespaces Begin is
// called with, and cancels the syncs of a namespace in flight on Revoke.
// Safe for concurrent use.
type Gate struct {
	mu           sync.Mutex
	admit, begin map[string]bool
	begun, ended []string
	cancels      map[string][]context.CancelCauseFunc
}

// ErrRevoked is the cause of the cancellation of a sync by Gate.Revoke.
var ErrRevoked = errors.New("the bucket was given up")

// NewGate returns a Gate that admits and begins the syncs of namespaces.
func NewGate(namespaces ...string) *Gate {
	g := &Gate{admit: map[string]bool{}, begin: map[string]bool{}, cancels: map[string][]context.CancelCauseFunc{}}
	for _, ns := range namespaces {
		g.admit[ns], g.begin[ns] = true, true
	}
	return g
}

// Set makes the Gate admit namespace's keys (admit) and begin its syncs
// (begin), from now on.
func (g *Gate) Set(namespace string, admit, begin bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admit[namespace], g.begin[namespace] = admit, begin
}

// Revoke stops admitting and beginning namespace, and cancels the syncs
// of namespace in flight (cause ErrRevoked), as a bucket given up.
func (g *Gate) Revoke(namespace string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admit[namespace], g.begin[namespace] = false, false
	for _, cancel := range g.cancels[namespace] {
		cancel(ErrRevoked)
	}
	delete(g.cancels, namespace)
}

// Admits reports whether namespace is admitted (engine.Gate).
func (g *Gate) Admits(namespace string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admit[namespace]
}

// Begin records namespace and begins its sync when the Gate begins it
// (engine.Gate).
func (g *Gate) Begin(ctx context.Context, namespace string) (context.Context, func(), bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.begun = append(g.begun, namespace)
	if !g.begin[namespace] {
		return nil, nil, false
	}
	syncCtx, cancel := context.WithCancelCause(ctx)
	g.cancels[namespace] = append(g.cancels[namespace], cancel)
	var once sync.Once
	return syncCtx, func() {
		once.Do(func() {
			cancel(context.Canceled)
			g.mu.Lock()
			defer g.mu.Unlock()
			g.ended = append(g.ended, namespace)
		})
	}, true
}

// Begun returns the namespaces Begin was called with, in order, begun or
// refused.
func (g *Gate) Begun() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.begun)
}

// Ended returns the namespaces of the syncs begun that ended (called
// done), in order.
func (g *Gate) Ended() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ended)
}

// Count returns how many times namespace is in namespaces.
func Count(namespaces []string, namespace string) int {
	n := 0
	for _, ns := range namespaces {
		if ns == namespace {
			n++
		}
	}
	return n
}

// Settle returns the namespaces g was asked to Begin, in order, once
// every key a controller of one worker queued so far has been synced: it
// queues, with enqueue, a key of namespace "settle" (of no object) last
// and waits for its Begin; that namespace is left out.
func (g *Gate) Settle(t *testing.T, enqueue func(namespace string)) []string {
	t.Helper()
	g.Set("settle", true, true)
	before := Count(g.Begun(), "settle")
	enqueue("settle")
	deadline := time.Now().Add(10 * time.Second)
	for Count(g.Begun(), "settle") == before {
		if time.Now().After(deadline) {
			t.Fatalf("the marker key was not synced within 10s; Begin was called for %v", g.Begun())
		}
		time.Sleep(time.Millisecond)
	}
	return slices.DeleteFunc(g.Begun(), func(ns string) bool { return ns == "settle" })
}

// Retries is a work queue's rate limiter (engine.Options.RateLimiter)
// that counts the retries the queue decides (When), by key text, and
// delays each by an hour: a sync retried shows in the count, not in
// another sync.
type Retries struct {
	mu   sync.Mutex
	when map[string]int
}

// When counts a retry of key.
func (r *Retries) When(key engine.Key) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.when == nil {
		r.when = map[string]int{}
	}
	r.when[key.String()]++
	return time.Hour
}

// Forget forgets nothing: the count is of every retry.
func (r *Retries) Forget(engine.Key) {}

// NumRequeues returns how many retries of key were decided.
func (r *Retries) NumRequeues(key engine.Key) int { return r.Of(key.String()) }

// Of returns how many retries of the key whose text is key were decided.
func (r *Retries) Of(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.when[key]
}
