/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import "github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"

// CredentialReferences lists the Secrets and ConfigMaps a webhook's
// caBundle, clientTLS, authorization and basicAuth name, in that order: the
// objects SecureTransport reads to call it, and CredentialPolicy.Check
// checks. An inline caBundle is not listed.
func CredentialReferences(w *v1alpha1.Webhook) []CredentialReference {
	if w == nil {
		return nil
	}
	var refs []CredentialReference
	for _, c := range credentialsOf(w) {
		refs = append(refs, c.ref)
	}
	return refs
}
