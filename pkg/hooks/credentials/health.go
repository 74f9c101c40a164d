package credentials

import (
	"crypto/tls"
	"crypto/x509"
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

// Record takes the result of a hook call: a CredentialError, or a server
// certificate that the configured CA bundle does not verify, is
// remembered; any other outcome clears it. It reports whether what is
// remembered changed: between healthy and not, or from one credential error
// to another (a Secret that appears without the right key, say), so that
// what reports it can say the new one.
func (h *CredentialHealth) Record(callErr error) (changed bool) {
	isCred := IsCredentialError(callErr) || isCertificateError(callErr)
	h.mu.Lock()
	defer h.mu.Unlock()
	before := h.err
	h.err = nil
	if isCred {
		h.err = callErr
	}
	return errorText(before) != errorText(h.err)
}

// errorText is err's message, or "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Err returns the last credential error, or nil when the hooks' credentials
// worked on the last call.
func (h *CredentialHealth) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// isCertificateError reports whether err is a failed verification of the
// hook's serving certificate: a wrong or missing CA bundle.
func isCertificateError(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}
