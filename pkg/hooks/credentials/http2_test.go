/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestHooksAreNotCalledOverHTTP2: an HTTPS hook (through the CA bundle's
// per-TLS-material transport and through the default client, both built
// by NewTransport) is called over HTTP/1.1 even when the server offers
// HTTP/2, whose transport would buffer answers waiting for room in the
// budget outside it (4 MiB per call by default), or, with small
// flow-control windows, let them starve the calls that hold room.
func TestHooksAreNotCalledOverHTTP2(t *testing.T) {
	var protoMajor atomic.Int32
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	srv := httptest.NewUnstartedServer(answer(statusAnswer(100)))
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protoMajor.Store(int32(r.ProtoMajor))
		answer(statusAnswer(100))(w, r)
	})
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if srv.TLS == nil || len(srv.TLS.NextProtos) == 0 || srv.TLS.NextProtos[0] != "h2" {
		t.Fatalf("the test server does not offer HTTP/2: %v", srv.TLS.NextProtos)
	}

	_, src := newSource(t)
	c, _ := secureClient(t, src)
	hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))}
	})
	if err := call(c, hook); err != nil {
		t.Fatal(err)
	}
	if p := protoMajor.Load(); p != 1 {
		t.Errorf("the hook with a CA bundle was called over HTTP/%d, want HTTP/1.1", p)
	}

	// The default client, trusting the server's CA.
	tr := hookclient.NewTransport()
	tr.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	plain := hookclient.NewClient(hookclient.Options{HTTPClient: &http.Client{Transport: tr}})
	protoMajor.Store(0)
	if err := call(plain, urlHook(srv.URL)); err != nil {
		t.Fatal(err)
	}
	if p := protoMajor.Load(); p != 1 {
		t.Errorf("the hook was called over HTTP/%d, want HTTP/1.1", p)
	}
}
