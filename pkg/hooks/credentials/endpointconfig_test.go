/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// A controller's endpointConfigs give the webhooks of their host the CA
// bundle and credentials, through the defaulting the controllers apply to
// their copy of the spec; a webhook with settings of its own takes nothing
// from them.
func TestEndpointConfigsReachTheHooks(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	auth := make(chan string, 10)
	srv := tlsServer(t, serverCert, func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{}`))
	}, nil)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, src := newSource(t,
		configMapObj("ns", "ca", map[string]string{"ca.crt": string(ca.pem)}),
		secretObj("ns", "token", map[string]string{"token": "from-endpoint-config"}),
		secretObj("ns", "basic", map[string]string{"username": "own", "password": "settings"}),
	)
	c, _ := secureClient(t, src)

	endpointConfigs := []v1alpha1.EndpointConfig{
		{Host: "elsewhere.example"},
		{Host: strings.ToUpper(u.Host),
			CABundle:      &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "ns", Name: "ca"}},
			Authorization: &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "ns", Name: "token"}}},
	}
	ownSettings := &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(srv.URL + "/finalize"),
		BasicAuth: &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "ns", Name: "basic"}}}}
	cc := &v1alpha1.CompositeController{Spec: v1alpha1.CompositeControllerSpec{
		EndpointConfigs: endpointConfigs,
		Hooks: &v1alpha1.CompositeControllerHooks{Hooks: v1alpha1.Hooks{
			Sync:     &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(srv.URL + "/sync")}},
			Finalize: ownSettings.DeepCopy(),
		}},
	}}
	dc := &v1alpha1.DecoratorController{Spec: v1alpha1.DecoratorControllerSpec{
		EndpointConfigs: endpointConfigs,
		Hooks:           &v1alpha1.Hooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: ptr.To(srv.URL + "/sync")}}},
	}}

	// Without defaulting, the sync hook has neither the CA nor the token.
	if err := call(c, cc.Spec.Hooks.Sync); !isCertError(err) {
		t.Fatalf("undefaulted sync hook: err = %v, want a certificate verification error", err)
	}

	v1alpha1.SetDefaults_CompositeController(cc)
	v1alpha1.SetDefaults_DecoratorController(dc)
	for name, hook := range map[string]*v1alpha1.Hook{"composite": cc.Spec.Hooks.Sync, "decorator": dc.Spec.Hooks.Sync} {
		if err := call(c, hook); err != nil {
			t.Fatalf("%s sync hook: %v", name, err)
		}
		if got := <-auth; got != "Bearer from-endpoint-config" {
			t.Errorf("%s sync hook sent Authorization %q", name, got)
		}
	}
	// The finalize hook's basicAuth is its only setting: no CA from the
	// endpoint config, so the server's certificate does not verify.
	if err := call(c, cc.Spec.Hooks.Finalize); !isCertError(err) {
		t.Errorf("finalize hook with settings of its own: err = %v, want a certificate verification error", err)
	}
}
