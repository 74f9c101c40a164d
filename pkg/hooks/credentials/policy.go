/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"net/url"
	"slices"
	"strings"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// AllNamespaces, as an entry of CredentialPolicy.Namespaces, allows
// credentials from every namespace.
const AllNamespaces = "*"

// The Refused values of a *CredentialError the policy gives; they are also
// the reasons of the Ready condition of a controller refused for them.
const (
	// RefusedNamespace: a Secret or ConfigMap in a namespace the policy
	// does not allow.
	RefusedNamespace = v1alpha1.ReasonCredentialNotAllowed
	// RefusedInsecure: credentials (authorization, basicAuth, clientTLS)
	// for a hook called over plain http.
	RefusedInsecure = v1alpha1.ReasonInsecureCredentials
)

// CredentialPolicy says where the credentials of hooks may be read from
// and how they may be sent. The manager checks every hook of a controller
// with it before the controller starts, and SecureTransport checks every
// call with it again, before reading anything. The zero value is the
// strictest: only a service hook's own namespace, and never over http.
type CredentialPolicy struct {
	// Namespaces are the namespaces whose Secrets and ConfigMaps a hook's
	// caBundle, clientTLS, authorization and basicAuth may name;
	// AllNamespaces ("*") allows every one. A hook given as a Service
	// (and no url) may always name its Service's namespace.
	Namespaces []string
	// AllowInsecure lets authorization, basicAuth and clientTLS be used by
	// hooks called over plain http. Default false: refused.
	AllowInsecure bool
	// InsecureHint ends the reason of a refusal of credentials over http,
	// after "call the hook over https, or ": what else the user may do.
	// Default: ", for development only, run metactl with
	// --allow-insecure-credentials" (a flag of metactl run and dev).
	InsecureHint string
}

// webhookCredential is one Secret or ConfigMap a webhook setting names.
type webhookCredential struct {
	setting string
	ref     CredentialReference
}

// credentialsOf lists the Secrets and ConfigMaps w names, with the key
// each setting reads (the first one for clientTLS and basicAuth), in the
// order caBundle, clientTLS, authorization, basicAuth. An inline caBundle
// is not listed.
func credentialsOf(w *v1alpha1.Webhook) []webhookCredential {
	var creds []webhookCredential
	if ca := w.CABundle; ca != nil && (ca.SecretRef != nil || ca.ConfigMapRef != nil) {
		creds = append(creds, webhookCredential{"caBundle", caReference(ca)})
	}
	if ct := w.ClientTLS; ct != nil {
		ns, name, certKey, _ := clientTLSRefs(ct)
		creds = append(creds, webhookCredential{"clientTLS", CredentialReference{Kind: "Secret", Namespace: ns, Name: name, Key: certKey}})
	}
	if a := w.Authorization; a != nil {
		creds = append(creds, webhookCredential{"authorization", CredentialReference{Kind: "Secret",
			Namespace: a.SecretRef.Namespace, Name: a.SecretRef.Name, Key: orDefault(a.SecretRef.Key, v1alpha1.DefaultAuthorizationKey)}})
	}
	if b := w.BasicAuth; b != nil {
		creds = append(creds, webhookCredential{"basicAuth", CredentialReference{Kind: "Secret",
			Namespace: b.SecretRef.Namespace, Name: b.SecretRef.Name}})
	}
	return creds
}

// Check returns the first setting of w that the policy refuses, as a
// *CredentialError whose Refused says why, or nil. Namespaces are checked
// before the scheme. It reads nothing.
//
// A reference's namespace is the one written in it, which is the one read:
// metactl never defaults it (the API requires it, and validation refuses
// an empty one); an empty namespace is never allowed.
func (p CredentialPolicy) Check(w *v1alpha1.Webhook) error {
	if w == nil {
		return nil
	}
	serviceNamespace := ""
	if w.URL == nil && w.Service != nil {
		serviceNamespace = serviceNamespaceOf(w)
	}
	for _, c := range credentialsOf(w) {
		if !p.namespaceAllowed(c.ref.Namespace, serviceNamespace) {
			return &CredentialError{Setting: c.setting, Reference: c.ref, Refused: RefusedNamespace,
				Reason: "namespace " + quoteNamespace(c.ref.Namespace) + " is not allowed for hook credentials: add the namespace to --credential-namespaces"}
		}
	}
	if p.AllowInsecure {
		return nil
	}
	var sent []webhookCredential
	for _, c := range credentialsOf(w) {
		if c.setting != "caBundle" {
			sent = append(sent, c)
		}
	}
	if len(sent) == 0 {
		return nil
	}
	address, err := w.Address()
	if err != nil {
		return nil // the call fails for its address, sending nothing
	}
	u, err := url.Parse(address)
	if err != nil {
		return nil // likewise
	}
	if u.Scheme == "https" {
		return nil
	}
	c := sent[0]
	hint := p.InsecureHint
	if hint == "" {
		hint = ", for development only, run metactl with --allow-insecure-credentials"
	} else {
		hint = " " + hint
	}
	return &CredentialError{Setting: c.setting, Reference: c.ref, Refused: RefusedInsecure,
		Reason: "credentials are never sent over plain " + u.Scheme + " (" + redact.URL(u.String()) + "): call the hook over https, or" + hint}
}

// serviceNamespaceOf returns the namespace of w's Service when w, a service
// hook, is called at that Service's host (ServiceReference.Host) and
// nowhere else, or "". Address refuses a name or namespace that is not a
// DNS label; the host of the address is compared as well, so that no
// field can send the namespace's credentials to another host.
func serviceNamespaceOf(w *v1alpha1.Webhook) string {
	address, err := w.Address()
	if err != nil {
		return ""
	}
	u, err := url.Parse(address)
	if err != nil || u.User != nil || !strings.EqualFold(u.Hostname(), w.Service.Host()) {
		return ""
	}
	return w.Service.Namespace
}

// namespaceAllowed reports whether a credential may be read from ns by a
// hook whose Service is in serviceNamespace (empty for a url hook).
func (p CredentialPolicy) namespaceAllowed(ns, serviceNamespace string) bool {
	if ns == "" {
		return false
	}
	if ns == serviceNamespace {
		return true
	}
	return slices.Contains(p.Namespaces, AllNamespaces) || slices.Contains(p.Namespaces, ns)
}

func quoteNamespace(ns string) string {
	if ns == "" {
		return `""`
	}
	return ns
}
