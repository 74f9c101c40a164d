/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// testCA is a certificate authority made for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate signed by ca, for a server on the loopback
// address or for a client, as PEM and as a tls.Certificate.
func (ca *testCA) issue(t *testing.T, name string, client bool) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames, tmpl.IPAddresses = nil, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// tlsServer starts a TLS hook server with cert; configure may change its
// TLS settings.
func tlsServer(t *testing.T, cert tls.Certificate, handler http.HandlerFunc, configure func(*tls.Config)) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are expected
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if configure != nil {
		configure(srv.TLS)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func secretObj(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func configMapObj(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

// newSource returns a fake clientset holding objs and a watching source on
// it, stopped at the end of the test.
func newSource(t *testing.T, objs ...runtime.Object) (*fake.Clientset, *WatchingCredentialSource) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	src := NewWatchingCredentialSource(cs)
	t.Cleanup(src.Stop)
	return cs, src
}

// secureClient returns a Client whose transport and credentials come from
// src, from any namespace, and may be sent over http.
func secureClient(t *testing.T, src CredentialSource) (*hookclient.Client, *SecureTransport) {
	t.Helper()
	return secureClientWithPolicy(t, src, CredentialPolicy{Namespaces: []string{AllNamespaces}, AllowInsecure: true})
}

// secureClientWithPolicy returns a Client whose transport and credentials
// come from src, within policy.
func secureClientWithPolicy(t *testing.T, src CredentialSource, policy CredentialPolicy) (*hookclient.Client, *SecureTransport) {
	t.Helper()
	st := NewSecureTransport(src, policy)
	t.Cleanup(st.CloseIdleConnections)
	return hookclient.NewClient(hookclient.Options{Transport: st, PrepareRequest: st}), st
}

func hookWith(url string, configure func(w *v1alpha1.Webhook)) *v1alpha1.Hook {
	h := urlHook(url)
	if configure != nil {
		configure(h.Webhook)
	}
	return h
}

func call(c *hookclient.Client, hook *v1alpha1.Hook) error {
	return c.Call(context.Background(), "ctl", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, hookclient.CallOptions{})
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// waitWatching waits until the source watches resource in ns, so that an
// update made afterwards reaches it (the fake clientset does not replay
// events a watch started too late would miss).
func waitWatching(t *testing.T, cs *fake.Clientset, resource, ns, name string) {
	t.Helper()
	eventually(t, 10*time.Second, "a watch of "+resource+" "+ns+"/"+name, func() bool {
		for _, a := range cs.Actions() {
			if w, ok := a.(k8stesting.WatchAction); ok && a.GetResource().Resource == resource &&
				a.GetNamespace() == ns && w.GetWatchRestrictions().Fields.String() == "metadata.name="+name {
				return true
			}
		}
		return false
	})
}

func isCertError(err error) bool {
	var certErr *tls.CertificateVerificationError
	return hookclient.IsUnreachable(err) && errors.As(err, &certErr)
}

func TestSecureTransportCABundle(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	srv := tlsServer(t, serverCert, answer(`{}`), nil)
	other := newTestCA(t, "another CA")

	_, src := newSource(t,
		secretObj("ns", "ca-secret", map[string]string{"ca.crt": string(ca.pem)}),
		configMapObj("ns", "ca-cm", map[string]string{"bundle.pem": string(other.pem) + string(ca.pem)}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ca-binary"}, BinaryData: map[string][]byte{"ca.crt": ca.pem}},
		configMapObj("ns", "wrong-ca", map[string]string{"ca.crt": string(other.pem)}),
	)
	c, st := secureClient(t, src)

	// Without a CA bundle the system roots do not know the server.
	if err := call(c, urlHook(srv.URL)); !isCertError(err) {
		t.Fatalf("no caBundle: err = %v, want a certificate verification error", err)
	}
	if hc, err := st.TransportFor(urlHook(srv.URL)); hc != nil || err != nil {
		t.Errorf("a hook without TLS settings should use the default client, got %v, %v", hc, err)
	}

	for name, ca := range map[string]*v1alpha1.CABundleConfig{
		"inline":              {Inline: ptr.To(string(ca.pem))},
		"secret, default key": {SecretRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "ca-secret"}},
		"configmap, own key":  {ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "ca-cm", Key: "bundle.pem"}},
		"configmap binary":    {ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "ca-binary"}},
	} {
		t.Run(name, func(t *testing.T) {
			hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) { w.CABundle = ca })
			if err := call(c, hook); err != nil {
				t.Fatal(err)
			}
		})
	}

	wrong := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "wrong-ca"}}
	})
	if err := call(c, wrong); !isCertError(err) || IsCredentialError(err) {
		t.Errorf("wrong CA: err = %v, want a certificate verification error", err)
	}
}

func TestSecureTransportRefusesTLS11(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "old server", false)
	old := tlsServer(t, serverCert, answer(`{}`), func(c *tls.Config) { c.MaxVersion = tls.VersionTLS11 })
	_, src := newSource(t)
	c, st := secureClient(t, src)
	hook := hookWith(old.URL, func(w *v1alpha1.Webhook) { w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))} })
	err := call(c, hook)
	if !hookclient.IsUnreachable(err) || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1 server: err = %v, want an UnreachableError for the protocol version", err)
	}
	hc, err := st.TransportFor(hook)
	if err != nil {
		t.Fatal(err)
	}
	cfg := hc.Transport.(*http.Transport).TLSClientConfig
	if cfg.MinVersion != tls.VersionTLS12 || cfg.InsecureSkipVerify {
		t.Errorf("TLS config: MinVersion %x, InsecureSkipVerify %v", cfg.MinVersion, cfg.InsecureSkipVerify)
	}
}

func TestSecureTransportClientCertificate(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	clientCA := newTestCA(t, "client CA")
	certPEM, keyPEM, _ := clientCA.issue(t, "metactl", true)
	strangerCert, strangerKey, _ := newTestCA(t, "unknown CA").issue(t, "stranger", true)

	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.cert)
	peers := make(chan string, 10)
	srv := tlsServer(t, serverCert, func(w http.ResponseWriter, r *http.Request) {
		peers <- r.TLS.PeerCertificates[0].Subject.CommonName
		_, _ = io.WriteString(w, `{}`)
	}, func(c *tls.Config) {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = clientPool
	})

	_, src := newSource(t,
		secretObj("ns", "client", map[string]string{"tls.crt": string(certPEM), "tls.key": string(keyPEM)}),
		secretObj("ns", "client-own-keys", map[string]string{"cert.pem": string(certPEM), "key.pem": string(keyPEM)}),
		secretObj("ns", "stranger", map[string]string{"tls.crt": string(strangerCert), "tls.key": string(strangerKey)}),
	)
	c, _ := secureClient(t, src)
	withCA := func(w *v1alpha1.Webhook) { w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))} }

	if err := call(c, hookWith(srv.URL, withCA)); !hookclient.IsUnreachable(err) {
		t.Errorf("without a client certificate: err = %v, want the server to refuse", err)
	}
	if err := call(c, hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		withCA(w)
		w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "stranger"}}
	})); !hookclient.IsUnreachable(err) {
		t.Errorf("with a certificate of an unknown CA: err = %v, want the server to refuse", err)
	}
	for _, ct := range []*v1alpha1.ClientTLSConfig{
		{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "client"}},
		{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "client-own-keys"}, CertKey: ptr.To("cert.pem"), PrivateKeyKey: ptr.To("key.pem")},
	} {
		hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) { withCA(w); w.ClientTLS = ct })
		if err := call(c, hook); err != nil {
			t.Fatalf("client certificate from %s: %v", ct.SecretRef.Name, err)
		}
		if cn := <-peers; cn != "metactl" {
			t.Errorf("server saw client %q", cn)
		}
	}

	// Only a client certificate: the server's certificate is checked
	// against the system roots, which do not know the test CA.
	onlyCert := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "client"}}
	})
	if err := call(c, onlyCert); !isCertError(err) {
		t.Errorf("client certificate without caBundle: err = %v, want a certificate verification error", err)
	}
}

func TestSecureTransportAuthorizationHeaders(t *testing.T) {
	headers := make(chan http.Header, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		_, _ = io.WriteString(w, `{}`)
	})
	_, src := newSource(t,
		secretObj("ns", "token", map[string]string{"token": "s3cret-token\n"}),
		secretObj("ns", "token-own-key", map[string]string{"jwt": "other-token"}),
		secretObj("ns", "basic", map[string]string{"username": " hook-user\n", "password": "pa:ss word\t\n"}),
		secretObj("ns", "basic-own-keys", map[string]string{"u": "alice", "p": ""}),
	)
	c, _ := secureClient(t, src)

	cases := []struct {
		name      string
		configure func(w *v1alpha1.Webhook)
		check     func(h http.Header) bool
	}{
		{"bearer, default key", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer, SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}
		}, func(h http.Header) bool { return h.Get("Authorization") == "Bearer s3cret-token" }},
		{"bearer, own key", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer, SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token-own-key", Key: "jwt"}}
		}, func(h http.Header) bool { return h.Get("Authorization") == "Bearer other-token" }},
		{"no type means Bearer", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}
		}, func(h http.Header) bool { return h.Get("Authorization") == "Bearer s3cret-token" }},
		{"another scheme", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: " Token ", SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}
		}, func(h http.Header) bool { return h.Get("Authorization") == "Token s3cret-token" }},
		{"basic, default keys, trimmed as metacontroller trims them", func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "basic"}}
		}, func(h http.Header) bool {
			u, p, ok := (&http.Request{Header: h}).BasicAuth()
			return ok && u == "hook-user" && p == "pa:ss word"
		}},
		{"basic, own keys, empty password", func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "basic-own-keys"}, UsernameKey: ptr.To("u"), PasswordKey: ptr.To("p")}
		}, func(h http.Header) bool {
			u, p, ok := (&http.Request{Header: h}).BasicAuth()
			return ok && u == "alice" && p == ""
		}},
		{"none", nil, func(h http.Header) bool { return h.Get("Authorization") == "" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := call(c, hookWith(srv.URL, tc.configure)); err != nil {
				t.Fatal(err)
			}
			if h := <-headers; !tc.check(h) {
				t.Errorf("Authorization = %q", h.Get("Authorization"))
			}
		})
	}
}

func TestSecureTransportCredentialErrors(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	certPEM, _, _ := ca.issue(t, "client", true)
	_, otherKeyPEM, _ := ca.issue(t, "other", true)
	secretValues := []string{"t0ken-value", "user-value", string(otherKeyPEM), "not a PEM bundle at all"}

	var called atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		called.Add(1)
		_, _ = io.WriteString(w, `{}`)
	})
	_, src := newSource(t,
		secretObj("ns", "wrong-key", map[string]string{"other": "t0ken-value"}),
		secretObj("ns", "empty-token", map[string]string{"token": " \n"}),
		secretObj("ns", "no-password", map[string]string{"username": "user-value"}),
		secretObj("ns", "colon-user", map[string]string{"username": "user-value:x", "password": "p"}),
		secretObj("ns", "mismatch", map[string]string{"tls.crt": string(certPEM), "tls.key": string(otherKeyPEM)}),
		secretObj("ns", "no-key", map[string]string{"tls.crt": string(certPEM)}),
		configMapObj("ns", "garbage", map[string]string{"ca.crt": "not a PEM bundle at all"}),
		configMapObj("ns", "bad-cert", map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}),
	)
	c, _ := secureClient(t, src)

	bearer := func(name, key string) func(w *v1alpha1.Webhook) {
		return func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer, SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: name, Key: key}}
		}
	}
	cases := []struct {
		name      string
		configure func(w *v1alpha1.Webhook)
		setting   string
		ref       CredentialReference
		reason    string
	}{
		{"missing token secret", bearer("nope", ""), "authorization", CredentialReference{"Secret", "ns", "nope", "token"}, "Secret not found"},
		{"missing token key", bearer("wrong-key", ""), "authorization", CredentialReference{"Secret", "ns", "wrong-key", "token"}, "key not found"},
		{"empty token", bearer("empty-token", ""), "authorization", CredentialReference{"Secret", "ns", "empty-token", "token"}, "empty"},
		{"type Basic", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: "basic", SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "wrong-key"}}
		}, "authorization", CredentialReference{"Secret", "ns", "wrong-key", "token"}, "use basicAuth"},
		{"type that is not a scheme", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: "Bearer x", SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "wrong-key"}}
		}, "authorization", CredentialReference{"Secret", "ns", "wrong-key", "token"}, "not an authentication scheme"},
		{"missing basic auth secret", func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "nope"}}
		}, "basicAuth", CredentialReference{"Secret", "ns", "nope", ""}, "Secret not found"},
		{"missing password key", func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "no-password"}}
		}, "basicAuth", CredentialReference{"Secret", "ns", "no-password", "password"}, "key not found"},
		{"colon in user name", func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "colon-user"}}
		}, "basicAuth", CredentialReference{"Secret", "ns", "colon-user", "username"}, "colon"},
		{"missing CA configmap", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "nope"}}
		}, "caBundle", CredentialReference{"ConfigMap", "ns", "nope", "ca.crt"}, "ConfigMap not found"},
		{"missing CA key", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "wrong-key", Key: "ca.pem"}}
		}, "caBundle", CredentialReference{"Secret", "ns", "wrong-key", "ca.pem"}, "key not found"},
		{"CA without PEM", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "garbage"}}
		}, "caBundle", CredentialReference{"ConfigMap", "ns", "garbage", "ca.crt"}, "no PEM certificate"},
		{"CA with a broken certificate", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "bad-cert"}}
		}, "caBundle", CredentialReference{"ConfigMap", "ns", "bad-cert", "ca.crt"}, "does not parse"},
		{"inline CA without PEM", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To("not a PEM bundle at all")}
		}, "caBundle", CredentialReference{}, "no PEM certificate"},
		{"client key does not match", func(w *v1alpha1.Webhook) {
			w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "mismatch"}}
		}, "clientTLS", CredentialReference{"Secret", "ns", "mismatch", ""}, "not a valid certificate and private key"},
		{"client key missing", func(w *v1alpha1.Webhook) {
			w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "no-key"}}
		}, "clientTLS", CredentialReference{"Secret", "ns", "no-key", "tls.key"}, "key not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := call(c, hookWith(srv.URL, tc.configure))
			var ce *CredentialError
			if !errors.As(err, &ce) || !IsCredentialError(err) {
				t.Fatalf("err = %v, want a CredentialError", err)
			}
			if ce.Controller != "ctl" || ce.Hook != "sync" || ce.Setting != tc.setting || ce.Reference != tc.ref || !strings.Contains(ce.Reason, tc.reason) {
				t.Errorf("error %+v, want setting %s, reference %+v, reason with %q", *ce, tc.setting, tc.ref, tc.reason)
			}
			msg := err.Error()
			for _, want := range []string{"sync hook", tc.ref.String()} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not name %q", msg, want)
				}
			}
			if strings.Contains(msg, `controller "ctl"`) {
				t.Errorf("message %q names the controller, which its caller does", msg)
			}
			for _, v := range secretValues {
				if strings.Contains(msg, strings.TrimSpace(v)) {
					t.Errorf("message %q shows a credential", msg)
				}
			}
			if strings.Contains(msg, "PRIVATE KEY") || strings.Contains(msg, "BEGIN") {
				t.Errorf("message %q shows PEM content", msg)
			}
		})
	}
	if n := called.Load(); n != 0 {
		t.Errorf("the hook was called %d times with unusable credentials", n)
	}
}

func TestSecureTransportForbiddenIsReportedAtOnce(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrorsForbidden("secrets", "token")
	})
	src := NewWatchingCredentialSource(cs)
	t.Cleanup(src.Stop)
	c, _ := secureClient(t, src)
	hook := hookWith("http://127.0.0.1:1/sync", func(w *v1alpha1.Webhook) {
		w.Timeout = &metav1.Duration{Duration: time.Minute}
		w.Authorization = &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer, SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}
	})
	start := time.Now()
	err := call(c, hook)
	var ce *CredentialError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "may not read") {
		t.Fatalf("err = %v, want a CredentialError for the permission", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s: the error should not wait for the hook's timeout", d)
	}
}

func TestSecureTransportSharesClients(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	other := newTestCA(t, "other CA")
	_, src := newSource(t,
		configMapObj("ns", "ca", map[string]string{"ca.crt": string(ca.pem)}),
		configMapObj("ns", "ca-copy", map[string]string{"ca.crt": string(ca.pem)}),
	)
	_, st := secureClient(t, src)
	fromCM := func(name string) *v1alpha1.Hook {
		return hookWith("https://a.example/sync", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: name}}
		})
	}
	a, err := st.TransportFor(fromCM("ca"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.TransportFor(fromCM("ca-copy"))
	if err != nil {
		t.Fatal(err)
	}
	inline, err := st.TransportFor(hookWith("https://b.example/sync", func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a != inline {
		t.Error("the same CA should give the same HTTP client")
	}
	d, err := st.TransportFor(hookWith("https://b.example/sync", func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(other.pem))}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if d == a {
		t.Error("another CA should give another HTTP client")
	}
	if n := st.clientCount(); n != 2 {
		t.Errorf("%d clients kept, want 2", n)
	}
}

func TestSecureTransportConcurrent(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	srv := tlsServer(t, serverCert, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}, nil)
	_, src := newSource(t,
		configMapObj("ns", "ca", map[string]string{"ca.crt": string(ca.pem)}),
		secretObj("ns", "token", map[string]string{"token": "tok"}),
	)
	c, st := secureClient(t, src)
	hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "ca"}}
		w.Authorization = &v1alpha1.AuthorizationConfig{Type: v1alpha1.AuthorizationBearer, SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				if err := call(c, hook); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := st.clientCount(); n != 1 {
		t.Errorf("%d clients, want 1", n)
	}
}

func TestSecureTransportExpiredClientCertificate(t *testing.T) {
	ca := newTestCA(t, "client CA")
	certPEM, keyPEM, _ := ca.issue(t, "metactl", true) // valid for an hour
	_, src := newSource(t, secretObj("ns", "client", map[string]string{"tls.crt": string(certPEM), "tls.key": string(keyPEM)}))
	_, st := secureClient(t, src)
	hook := hookWith("https://hook.example/sync", func(w *v1alpha1.Webhook) {
		w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "client"}}
	})
	if _, err := st.TransportFor(hook); err != nil {
		t.Fatal(err)
	}
	st.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	_, err := st.TransportFor(hook)
	var ce *CredentialError
	if !errors.As(err, &ce) || ce.Setting != "clientTLS" || !strings.Contains(ce.Reason, "expired") {
		t.Fatalf("err = %v, want a CredentialError for the expired certificate", err)
	}
}
