/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

func TestCredentialPolicyCheck(t *testing.T) {
	token := func(ns string) *v1alpha1.AuthorizationConfig {
		return &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: ns, Name: "token"}}
	}
	urlWebhook := func(url string, configure func(w *v1alpha1.Webhook)) *v1alpha1.Webhook {
		w := &v1alpha1.Webhook{URL: ptr.To(url)}
		configure(w)
		return w
	}
	serviceWebhook := func(protocol *string, configure func(w *v1alpha1.Webhook)) *v1alpha1.Webhook {
		w := &v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "hook", Namespace: "team-a", Protocol: protocol}}
		configure(w)
		return w
	}
	serviceOf := func(name, namespace string, configure func(w *v1alpha1.Webhook)) *v1alpha1.Webhook {
		w := &v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: name, Namespace: namespace, Protocol: ptr.To("https")}}
		configure(w)
		return w
	}
	allowed := CredentialPolicy{Namespaces: []string{"metactl", "shared"}}
	cases := []struct {
		name    string
		policy  CredentialPolicy
		webhook *v1alpha1.Webhook
		refused string // "" when allowed
		says    []string
	}{
		{"allowed namespace, https", allowed, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("shared") }), "", nil},
		{"other namespace", allowed, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("kube-system") }),
			RefusedNamespace, []string{"authorization", "Secret kube-system/token", "add the namespace to --credential-namespaces"}},
		{"every namespace", CredentialPolicy{Namespaces: []string{AllNamespaces}}, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("kube-system") }), "", nil},
		{"no namespace allowed", CredentialPolicy{}, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("metactl") }), RefusedNamespace, nil},
		{"empty namespace", CredentialPolicy{Namespaces: []string{AllNamespaces}}, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("") }),
			RefusedNamespace, []string{`namespace "" is not allowed`}},
		{"service hook, its own namespace", CredentialPolicy{}, serviceWebhook(ptr.To("https"), func(w *v1alpha1.Webhook) { w.Authorization = token("team-a") }), "", nil},
		{"service hook, another namespace", CredentialPolicy{}, serviceWebhook(ptr.To("https"), func(w *v1alpha1.Webhook) { w.Authorization = token("team-b") }),
			RefusedNamespace, []string{"Secret team-b/token"}},
		// A Service whose name or namespace would move the host elsewhere
		// does not lend its namespace's credentials.
		{"service name that is a host and path", CredentialPolicy{}, serviceOf("evil.example.com/", "team-b", func(w *v1alpha1.Webhook) { w.Authorization = token("team-b") }),
			RefusedNamespace, []string{"Secret team-b/token"}},
		{"service name with user information", CredentialPolicy{}, serviceOf("x@evil.com:443/?", "team-b", func(w *v1alpha1.Webhook) { w.Authorization = token("team-b") }),
			RefusedNamespace, nil},
		{"service name with dots", CredentialPolicy{}, serviceOf("evil.com", "team-b", func(w *v1alpha1.Webhook) { w.Authorization = token("team-b") }),
			RefusedNamespace, nil},
		{"service namespace that is a host", CredentialPolicy{}, serviceOf("hook", "evil.com#", func(w *v1alpha1.Webhook) { w.Authorization = token("evil.com#") }),
			RefusedNamespace, nil},
		{"service protocol that is a URL", CredentialPolicy{}, serviceOf("hook", "team-b", func(w *v1alpha1.Webhook) {
			w.Service.Protocol = ptr.To("https://evil.com/#")
			w.Authorization = token("team-b")
		}), RefusedNamespace, nil},
		{"service path that is a host", CredentialPolicy{}, serviceOf("hook", "team-b", func(w *v1alpha1.Webhook) {
			w.Path = ptr.To("@evil.com/")
			w.Authorization = token("team-b")
		}), RefusedNamespace, nil},
		{"url wins over service: no service namespace", CredentialPolicy{}, serviceWebhook(ptr.To("https"), func(w *v1alpha1.Webhook) {
			w.URL = ptr.To("https://h/sync")
			w.Authorization = token("team-a")
		}), RefusedNamespace, nil},
		{"inline caBundle", CredentialPolicy{}, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To("PEM")}
		}), "", nil},
		{"caBundle ConfigMap", allowed, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "other", Name: "ca"}}
		}), RefusedNamespace, []string{"caBundle", "ConfigMap other/ca"}},
		{"caBundle Secret", allowed, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "other", Name: "ca"}}
		}), RefusedNamespace, []string{"caBundle", "Secret other/ca"}},
		{"clientTLS", allowed, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) {
			w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "other", Name: "cert"}}
		}), RefusedNamespace, []string{"clientTLS", "Secret other/cert"}},
		{"basicAuth", allowed, urlWebhook("https://h/sync", func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "other", Name: "basic"}}
		}), RefusedNamespace, []string{"basicAuth", "Secret other/basic"}},
		{"authorization over http", allowed, urlWebhook("http://h/sync?key=x", func(w *v1alpha1.Webhook) { w.Authorization = token("shared") }),
			RefusedInsecure, []string{"authorization", "Secret shared/token", "plain http (http://h/sync?key=<redacted>)", "--allow-insecure-credentials"}},
		{"URL scheme in capitals", allowed, urlWebhook("HTTP://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("shared") }), RefusedInsecure, nil},
		{"basicAuth, service with the default protocol", CredentialPolicy{}, serviceWebhook(nil, func(w *v1alpha1.Webhook) {
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "team-a", Name: "basic"}}
		}), RefusedInsecure, []string{"basicAuth", "http://hook.team-a:80"}},
		{"clientTLS over http", allowed, urlWebhook("http://h/sync", func(w *v1alpha1.Webhook) {
			w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "shared", Name: "cert"}}
		}), RefusedInsecure, []string{"clientTLS"}},
		{"only a caBundle over http", allowed, urlWebhook("http://h/sync", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "shared", Name: "ca"}}
		}), "", nil},
		{"http allowed", CredentialPolicy{Namespaces: allowed.Namespaces, AllowInsecure: true}, urlWebhook("http://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("shared") }), "", nil},
		{"namespace is checked before the scheme", CredentialPolicy{}, urlWebhook("http://h/sync", func(w *v1alpha1.Webhook) { w.Authorization = token("other") }), RefusedNamespace, nil},
		{"no credentials over http", CredentialPolicy{}, urlWebhook("http://h/sync", func(*v1alpha1.Webhook) {}), "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(tc.webhook)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *CredentialError
			if !errors.As(err, &ce) || ce.Refused != tc.refused {
				t.Fatalf("err = %v, want a *CredentialError refused for %s", err, tc.refused)
			}
			for _, want := range tc.says {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not say %q", err, want)
				}
			}
		})
	}
}

// SecureTransport checks every call with its policy before reading any
// Secret or sending anything; a call the policy allows goes through.
func TestSecureTransportEnforcesPolicy(t *testing.T) {
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	var received atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		_, _ = w.Write([]byte(`{}`))
	}
	plain := serve(t, handler)
	secure := tlsServer(t, serverCert, handler, nil)
	cs, src := newSource(t,
		secretObj("hooks", "token", map[string]string{"token": "t"}),
		secretObj("other", "token", map[string]string{"token": "t"}),
	)
	c, _ := secureClientWithPolicy(t, src, CredentialPolicy{Namespaces: []string{"hooks"}})
	withToken := func(url, ns string) *v1alpha1.Hook {
		return hookWith(url, func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))}
			w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: ns, Name: "token"}}
		})
	}
	for _, tc := range []struct {
		name    string
		hook    *v1alpha1.Hook
		refused string
	}{
		{"namespace not allowed", withToken(secure.URL, "other"), RefusedNamespace},
		{"over http", withToken(plain.URL, "hooks"), RefusedInsecure},
		{"client certificate from a namespace not allowed", hookWith(secure.URL, func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))}
			w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "other", Name: "cert"}}
		}), RefusedNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := call(c, tc.hook)
			var ce *CredentialError
			if !errors.As(err, &ce) || ce.Refused != tc.refused || ce.Hook != "sync" {
				t.Fatalf("err = %v, want a *CredentialError of the sync hook refused for %s", err, tc.refused)
			}
			if n := received.Load(); n != 0 {
				t.Errorf("the hook received %d requests", n)
			}
		})
	}
	for _, a := range cs.Actions() {
		if a.GetNamespace() == "other" || a.GetResource().Resource != "secrets" {
			t.Errorf("a refused call read %s in %q", a.GetResource().Resource, a.GetNamespace())
		}
	}
	// What the policy allows is sent.
	if err := call(c, withToken(secure.URL, "hooks")); err != nil {
		t.Fatal(err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("the hook received %d requests, want 1", n)
	}
}
