package hooks

import (
	"errors"
	"sync"
)

// CredentialHealth remembers whether a controller's hooks last failed for
// their credentials (a CredentialError), so that the controller object can
// say so in its Ready condition. It is safe for concurrent use.
type CredentialHealth struct {
	mu  sync.Mutex
	err error
}

// Record takes the result of a hook call: a CredentialError is remembered,
// any other outcome that reached the hook (success or another error)
// clears it. It reports whether the remembered state changed between
// healthy and not.
func (h *CredentialHealth) Record(callErr error) (changed bool) {
	var credErr *CredentialError
	isCred := errors.As(callErr, &credErr)
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.err != nil
	if isCred {
		h.err = callErr
	} else {
		h.err = nil
	}
	return was != isCred
}

// Err returns the last credential error, or nil when the hooks' credentials
// worked on the last call.
func (h *CredentialHealth) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}
