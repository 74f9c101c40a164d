/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// SecureTransport applies the transport security and credentials of each
// webhook, read through a CredentialSource: it is both the
// TransportResolver and the RequestPreparer of a hookclient.Client.
//
//   - caBundle (inline, or a key of a Secret or ConfigMap, default key
//     ca.crt) replaces the system roots for that hook;
//   - clientTLS (a Secret, keys tls.crt and tls.key by default) is the
//     client certificate presented to the hook;
//   - authorization (a key of a Secret, default token) sends
//     "Authorization: <type> <token>", type defaulting to Bearer; Basic is
//     refused, basicAuth being the setting for it;
//   - basicAuth (a Secret, keys username and password by default) sends
//     HTTP basic authentication.
//
// Certificates are always verified and TLS 1.2 is the minimum; there is no
// way to turn either off. A hook without caBundle and clientTLS uses the
// Client's default HTTP client. No client follows redirects.
//
// Before reading anything for a call, the transport checks the hook with
// its CredentialPolicy (the namespaces credentials may come from, and no
// credentials over plain http): a refused setting gives a *CredentialError
// with Refused set, and the hook is not called. The manager refuses such a
// controller before it starts; this check is the second line.
//
// One *http.Client, with its own connection pool, is kept per distinct TLS
// material (CA bundle, client certificate and key, compared by hash), so
// calls reuse connections. Credentials are read again on every call, from
// the source's cache: a rotated token is sent on the next call, and a
// rotated CA or client certificate gives a new HTTP client while the idle
// connections of the old one are closed.
//
// A missing object or key, or malformed content, gives a *CredentialError.
type SecureTransport struct {
	source CredentialSource
	policy CredentialPolicy
	now    func() time.Time

	mu        sync.Mutex
	clients   map[tlsMaterialKey]*tlsClient
	bindings  map[string]*tlsBinding // by the description of a hook's TLS references
	lastSweep time.Time
}

// tlsMaterialKey is the hash of the TLS material of a client.
type tlsMaterialKey [sha256.Size]byte

// tlsClient is the HTTP client of one TLS material.
type tlsClient struct {
	client    *http.Client
	transport *http.Transport
	// notAfter is the expiry of the client certificate, zero without one.
	notAfter time.Time
	// refs counts the bindings that use the client.
	refs int
}

// tlsBinding records which material a set of TLS references (for example
// "the CA of ConfigMap ns/ca and the certificate of Secret ns/cert") gave
// last, so that the client of the previous material is released when the
// material changes.
type tlsBinding struct {
	material tlsMaterialKey
	lastUsed time.Time
}

// tlsBindingIdle is how long a binding not used is kept; tlsSweepEvery is
// how often bindings are looked at.
const (
	tlsBindingIdle = time.Hour
	tlsSweepEvery  = 5 * time.Minute
)

// NewSecureTransport returns a SecureTransport reading credentials from
// source, within policy.
func NewSecureTransport(source CredentialSource, policy CredentialPolicy) *SecureTransport {
	return &SecureTransport{
		source:   source,
		policy:   policy,
		now:      time.Now,
		clients:  map[tlsMaterialKey]*tlsClient{},
		bindings: map[string]*tlsBinding{},
	}
}

var (
	_ hookclient.ContextTransportResolver = (*SecureTransport)(nil)
	_ hookclient.RequestPreparer          = (*SecureTransport)(nil)
)

// TransportFor implements hookclient.TransportResolver. Reading credentials is bounded
// by the hook's timeout; hookclient.Client.Call uses TransportForContext
// instead.
func (st *SecureTransport) TransportFor(hook *v1alpha1.Hook) (*http.Client, error) {
	timeout := v1alpha1.DefaultHookTimeout
	if hook != nil && hook.Webhook != nil {
		timeout = hooks.Timeout(hook.Webhook)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return st.TransportForContext(ctx, hook)
}

// TransportForContext implements hookclient.ContextTransportResolver: it returns the
// HTTP client for the TLS settings of hook, or nil when it has none.
func (st *SecureTransport) TransportForContext(ctx context.Context, hook *v1alpha1.Hook) (*http.Client, error) {
	if hook == nil || hook.Webhook == nil {
		return nil, nil
	}
	w := hook.Webhook
	if err := st.policy.Check(w); err != nil {
		return nil, err
	}
	if w.CABundle == nil && w.ClientTLS == nil {
		return nil, nil
	}
	ca, err := st.caBundle(ctx, w.CABundle)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := st.clientCertificate(ctx, w.ClientTLS)
	if err != nil {
		return nil, err
	}
	key := tlsMaterialHash(ca, certPEM, keyPEM)
	binding := tlsBindingKey(w)

	now := st.now()
	st.mu.Lock()
	st.sweepLocked(now)
	if tc := st.clients[key]; tc != nil {
		defer st.mu.Unlock()
		return st.bindLocked(binding, key, tc, w.ClientTLS, now)
	}
	st.mu.Unlock()

	// A new material: parse it outside the lock.
	tc, err := newTLSClient(ca, certPEM, keyPEM, w)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if existing := st.clients[key]; existing != nil {
		tc = existing // another call made it meanwhile; ours never dialled
	} else {
		st.clients[key] = tc
	}
	return st.bindLocked(binding, key, tc, w.ClientTLS, now)
}

// bindLocked records that binding now gives the material key, whose client
// is tc, releasing the client of the material it gave before, and returns
// the client.
func (st *SecureTransport) bindLocked(binding string, key tlsMaterialKey, tc *tlsClient, ct *v1alpha1.ClientTLSConfig, now time.Time) (*http.Client, error) {
	b := st.bindings[binding]
	switch {
	case b == nil:
		b = &tlsBinding{material: key}
		st.bindings[binding] = b
		tc.refs++
	case b.material != key:
		tc.refs++
		st.releaseLocked(b.material)
		b.material = key
	}
	b.lastUsed = now
	if !tc.notAfter.IsZero() && now.After(tc.notAfter) {
		ns, name, certKey, _ := clientTLSRefs(ct)
		return nil, &CredentialError{Setting: "clientTLS",
			Reference: CredentialReference{Kind: "Secret", Namespace: ns, Name: name, Key: certKey},
			Reason:    "the client certificate expired at " + tc.notAfter.UTC().Format(time.RFC3339)}
	}
	return tc.client, nil
}

// releaseLocked drops one use of the client of material key, and closes
// the client when it was the last.
func (st *SecureTransport) releaseLocked(key tlsMaterialKey) {
	tc := st.clients[key]
	if tc == nil {
		return
	}
	if tc.refs--; tc.refs <= 0 {
		delete(st.clients, key)
		tc.transport.CloseIdleConnections()
	}
}

// sweepLocked forgets the bindings not used for tlsBindingIdle, and closes
// the clients no binding uses any more.
func (st *SecureTransport) sweepLocked(now time.Time) {
	if now.Sub(st.lastSweep) < tlsSweepEvery {
		return
	}
	st.lastSweep = now
	for k, b := range st.bindings {
		if now.Sub(b.lastUsed) >= tlsBindingIdle {
			delete(st.bindings, k)
			st.releaseLocked(b.material)
		}
	}
}

// CloseIdleConnections closes the idle connections of every HTTP client
// the transport made, for example at shutdown.
func (st *SecureTransport) CloseIdleConnections() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, tc := range st.clients {
		tc.transport.CloseIdleConnections()
	}
}

// clientCount is the number of HTTP clients kept, for tests.
func (st *SecureTransport) clientCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.clients)
}

// tlsBindingKey describes where the TLS material of w comes from, without
// the material itself: the same key gives the same material until a
// rotation.
func tlsBindingKey(w *v1alpha1.Webhook) string {
	var b strings.Builder
	if ca := w.CABundle; ca != nil {
		switch {
		case ca.Inline != nil:
			// An inline bundle is its own source: two hooks with different
			// inline bundles must not take turns releasing each other's
			// client.
			sum := sha256.Sum256([]byte(*ca.Inline))
			fmt.Fprintf(&b, "ca=inline:%x;", sum[:8])
		case ca.SecretRef != nil:
			fmt.Fprintf(&b, "ca=secret:%q;", keyRef(ca.SecretRef, v1alpha1.DefaultCABundleKey))
		case ca.ConfigMapRef != nil:
			fmt.Fprintf(&b, "ca=configmap:%q;", keyRef(ca.ConfigMapRef, v1alpha1.DefaultCABundleKey))
		}
	}
	if ct := w.ClientTLS; ct != nil {
		ns, name, certKey, keyKey := clientTLSRefs(ct)
		fmt.Fprintf(&b, "cert=%q;", []string{ns, name, certKey, keyKey})
	}
	return b.String()
}

func keyRef(r *v1alpha1.KeyReference, defaultKey string) []string {
	key := r.Key
	if key == "" {
		key = defaultKey
	}
	return []string{r.Namespace, r.Name, key}
}

// tlsMaterialHash hashes the TLS material of a client; a nil CA (system
// roots) differs from an empty one.
func tlsMaterialHash(ca, cert, key []byte) tlsMaterialKey {
	h := sha256.New()
	for _, part := range [][]byte{ca, cert, key} {
		writePart(h, part)
	}
	var k tlsMaterialKey
	h.Sum(k[:0])
	return k
}

func writePart(h hash.Hash, part []byte) {
	var n [9]byte
	if part != nil {
		n[0] = 1
	}
	binary.BigEndian.PutUint64(n[1:], uint64(len(part)))
	h.Write(n[:])
	h.Write(part)
}

// newTLSClient parses the TLS material and builds its HTTP client.
func newTLSClient(ca, certPEM, keyPEM []byte, w *v1alpha1.Webhook) (*tlsClient, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != nil {
		pool, err := parseCABundle(ca)
		if err != nil {
			return nil, &CredentialError{Setting: "caBundle", Reference: caReference(w.CABundle), Reason: err.Error()}
		}
		cfg.RootCAs = pool
	}
	tc := &tlsClient{}
	if certPEM != nil {
		ns, name, certKey, keyKey := clientTLSRefs(w.ClientTLS)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// The errors of X509KeyPair are fixed texts that never quote
			// the key.
			return nil, &CredentialError{Setting: "clientTLS",
				Reference: CredentialReference{Kind: "Secret", Namespace: ns, Name: name},
				Reason:    fmt.Sprintf("keys %q and %q are not a valid certificate and private key: %v", certKey, keyKey, err)}
		}
		if pair.Leaf != nil {
			tc.notAfter = pair.Leaf.NotAfter
		}
		// Present the certificate whatever CAs the server says it accepts,
		// and let the server decide.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &pair, nil
		}
	}
	tr := hookclient.NewTransport()
	tr.TLSClientConfig = cfg
	tc.transport = tr
	tc.client = hookclient.NewHTTPClient(tr)
	return tc, nil
}

// parseCABundle reads the certificates of a PEM bundle. Blocks of other
// types are skipped; a certificate that does not parse, or a bundle
// without any, is an error.
func parseCABundle(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		n++
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the PEM bundle does not parse: %v", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}

// caBundle returns the PEM bundle of ca; nil when ca is nil.
func (st *SecureTransport) caBundle(ctx context.Context, ca *v1alpha1.CABundleConfig) ([]byte, error) {
	if ca == nil {
		return nil, nil
	}
	switch {
	case ca.Inline != nil:
		return []byte(*ca.Inline), nil
	case ca.SecretRef != nil:
		r := ca.SecretRef
		ref := CredentialReference{Kind: "Secret", Namespace: r.Namespace, Name: r.Name, Key: orDefault(r.Key, v1alpha1.DefaultCABundleKey)}
		return st.secretKey(ctx, "caBundle", ref)
	case ca.ConfigMapRef != nil:
		r := ca.ConfigMapRef
		ref := CredentialReference{Kind: "ConfigMap", Namespace: r.Namespace, Name: r.Name, Key: orDefault(r.Key, v1alpha1.DefaultCABundleKey)}
		cm, err := st.source.ConfigMap(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return nil, lookupError("caBundle", ref, err)
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return []byte(v), nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return v, nil
		}
		return nil, &CredentialError{Setting: "caBundle", Reference: ref, Reason: "key not found"}
	default:
		return nil, &CredentialError{Setting: "caBundle", Reason: "none of inline, secretRef and configMapRef is set"}
	}
}

func caReference(ca *v1alpha1.CABundleConfig) CredentialReference {
	switch {
	case ca.SecretRef != nil:
		return CredentialReference{Kind: "Secret", Namespace: ca.SecretRef.Namespace, Name: ca.SecretRef.Name, Key: orDefault(ca.SecretRef.Key, v1alpha1.DefaultCABundleKey)}
	case ca.ConfigMapRef != nil:
		return CredentialReference{Kind: "ConfigMap", Namespace: ca.ConfigMapRef.Namespace, Name: ca.ConfigMapRef.Name, Key: orDefault(ca.ConfigMapRef.Key, v1alpha1.DefaultCABundleKey)}
	}
	return CredentialReference{}
}

// clientCertificate returns the PEM certificate and key of ct; nil when ct
// is nil.
func (st *SecureTransport) clientCertificate(ctx context.Context, ct *v1alpha1.ClientTLSConfig) (cert, key []byte, err error) {
	if ct == nil {
		return nil, nil, nil
	}
	ns, name, certKey, keyKey := clientTLSRefs(ct)
	secret, err := st.source.Secret(ctx, ns, name)
	if err != nil {
		return nil, nil, lookupError("clientTLS", CredentialReference{Kind: "Secret", Namespace: ns, Name: name}, err)
	}
	cert, err = dataKey(secret.Data, "clientTLS", CredentialReference{Kind: "Secret", Namespace: ns, Name: name, Key: certKey})
	if err != nil {
		return nil, nil, err
	}
	key, err = dataKey(secret.Data, "clientTLS", CredentialReference{Kind: "Secret", Namespace: ns, Name: name, Key: keyKey})
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func clientTLSRefs(ct *v1alpha1.ClientTLSConfig) (ns, name, certKey, keyKey string) {
	certKey, keyKey = v1alpha1.DefaultClientCertKey, v1alpha1.DefaultClientPrivateKeyKey
	if ct.CertKey != nil && *ct.CertKey != "" {
		certKey = *ct.CertKey
	}
	if ct.PrivateKeyKey != nil && *ct.PrivateKeyKey != "" {
		keyKey = *ct.PrivateKeyKey
	}
	return ct.SecretRef.Namespace, ct.SecretRef.Name, certKey, keyKey
}

// PrepareRequest implements hookclient.RequestPreparer: it sets the Authorization
// header of hooks with authorization or basicAuth, once the policy allows
// the hook. Reading the Secret is bounded by the request's context.
func (st *SecureTransport) PrepareRequest(hook *v1alpha1.Hook, req *http.Request) error {
	if hook == nil || hook.Webhook == nil {
		return nil
	}
	w := hook.Webhook
	if err := st.policy.Check(w); err != nil {
		return err
	}
	ctx := req.Context()
	switch {
	case w.Authorization != nil && w.BasicAuth != nil:
		return &CredentialError{Setting: "authorization", Reason: "authorization and basicAuth are mutually exclusive"}
	case w.Authorization != nil:
		a := w.Authorization
		ref := CredentialReference{Kind: "Secret", Namespace: a.SecretRef.Namespace, Name: a.SecretRef.Name,
			Key: orDefault(a.SecretRef.Key, v1alpha1.DefaultAuthorizationKey)}
		scheme := strings.TrimSpace(string(a.Type))
		switch {
		case scheme == "":
			scheme = string(v1alpha1.AuthorizationBearer)
		case strings.EqualFold(scheme, "Basic"):
			return &CredentialError{Setting: "authorization", Reference: ref, Reason: "type Basic is not supported: use basicAuth"}
		case strings.ContainsAny(scheme, " \t") || !validHeaderValue(scheme):
			return &CredentialError{Setting: "authorization", Reference: ref, Reason: fmt.Sprintf("type %q is not an authentication scheme", scheme)}
		}
		b, err := st.secretKey(ctx, "authorization", ref)
		if err != nil {
			return err
		}
		// A token written with a trailing newline (kubectl create secret
		// --from-file) is meant without it.
		token := strings.TrimSpace(string(b))
		if token == "" {
			return &CredentialError{Setting: "authorization", Reference: ref, Reason: "the token is empty"}
		}
		if !validHeaderValue(token) {
			return &CredentialError{Setting: "authorization", Reference: ref, Reason: "the token has characters not allowed in an HTTP header"}
		}
		req.Header.Set("Authorization", scheme+" "+token)
	case w.BasicAuth != nil:
		ba := w.BasicAuth
		ns, name := ba.SecretRef.Namespace, ba.SecretRef.Name
		userKey, passKey := v1alpha1.DefaultBasicAuthUsernameKey, v1alpha1.DefaultBasicAuthPasswordKey
		if ba.UsernameKey != nil && *ba.UsernameKey != "" {
			userKey = *ba.UsernameKey
		}
		if ba.PasswordKey != nil && *ba.PasswordKey != "" {
			passKey = *ba.PasswordKey
		}
		secret, err := st.source.Secret(ctx, ns, name)
		if err != nil {
			return lookupError("basicAuth", CredentialReference{Kind: "Secret", Namespace: ns, Name: name}, err)
		}
		userRef := CredentialReference{Kind: "Secret", Namespace: ns, Name: name, Key: userKey}
		user, err := dataKey(secret.Data, "basicAuth", userRef)
		if err != nil {
			return err
		}
		pass, err := dataKey(secret.Data, "basicAuth", CredentialReference{Kind: "Secret", Namespace: ns, Name: name, Key: passKey})
		if err != nil {
			return err
		}
		// As the token above, and as metacontroller does: spaces and
		// newlines around each (kubectl create secret --from-file) are
		// not meant.
		username := strings.TrimSpace(string(user))
		switch {
		case username == "":
			return &CredentialError{Setting: "basicAuth", Reference: userRef, Reason: "the user name is empty"}
		case strings.Contains(username, ":"):
			return &CredentialError{Setting: "basicAuth", Reference: userRef, Reason: "the user name contains a colon"}
		}
		req.SetBasicAuth(username, strings.TrimSpace(string(pass)))
	}
	return nil
}

// secretKey returns the value of one key of a Secret.
func (st *SecureTransport) secretKey(ctx context.Context, setting string, ref CredentialReference) ([]byte, error) {
	secret, err := st.source.Secret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, lookupError(setting, ref, err)
	}
	return dataKey(secret.Data, setting, ref)
}

func dataKey(data map[string][]byte, setting string, ref CredentialReference) ([]byte, error) {
	v, ok := data[ref.Key]
	if !ok {
		return nil, &CredentialError{Setting: setting, Reference: ref, Reason: "key not found"}
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// lookupError turns an error of the source into a *CredentialError when
// the user can fix it (a missing object, or no permission to read it), and
// wraps it otherwise (an API server that cannot be reached, a cancelled
// context).
func lookupError(setting string, ref CredentialReference, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return &CredentialError{Setting: setting, Reference: ref, Reason: ref.Kind + " not found"}
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return &CredentialError{Setting: setting, Reference: ref, Reason: "metactl may not read it: " + err.Error()}
	}
	return fmt.Errorf("%s: reading %s: %w", setting, ref, err)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// validHeaderValue reports whether s can be sent in a header: no control
// characters but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
