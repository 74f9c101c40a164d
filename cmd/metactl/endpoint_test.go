package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/debugauth"
)

// TestProxyConfigForwardsTheToken: requests of a client built from
// proxyConfig carry the kubeconfig's bearer token in
// debugauth.TokenHeader, which the API server's Pod proxy passes on to
// metactl (it consumes Authorization); debugClient sends it as
// Authorization.
func TestProxyConfigForwardsTheToken(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "the-token"}
	core, err := corev1client.NewForConfig(proxyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods("metactl-system").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := got.Get(debugauth.TokenHeader); v != "Bearer the-token" {
		t.Errorf("%s = %q, want the kubeconfig's token", debugauth.TokenHeader, v)
	}
	if cfg.WrapTransport != nil {
		t.Error("proxyConfig changed the config it was given")
	}

	client, err := debugClient(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(srv.URL + "/debug/explain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := got.Get("Authorization"); v != "Bearer the-token" {
		t.Errorf("debugClient's Authorization = %q, want the kubeconfig's token", v)
	}
}
