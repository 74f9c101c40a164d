/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package credentials gives hook calls their transport security and
// credentials: SecureTransport reads each webhook's caBundle, clientTLS,
// authorization and basicAuth from a CredentialSource and is both the
// TransportResolver and the RequestPreparer of a hookclient.Client;
// WatchingCredentialSource reads the Secrets and ConfigMaps they name from
// a cluster; CredentialPolicy says which of them may be read and sent;
// CredentialError says what cannot be used, and CredentialHealth
// remembers it for a controller's Ready condition.
//
// # Transport security and credentials
//
// Per-webhook transport settings and credentials plug in through
// hookclient.Options.Transport (an *http.Client per hook; a
// hookclient.ContextTransportResolver gets the call's context) and
// hookclient.Options.PrepareRequest (headers of each request).
// SecureTransport is both: it reads caBundle (inline, or from a Secret or
// ConfigMap), clientTLS, authorization (any scheme but Basic, Bearer by
// default) and basicAuth from a CredentialSource, keeps one HTTP client per
// distinct TLS material (each following no redirect, as
// hookclient.NewHTTPClient makes them) so that connections are reused, and always verifies certificates with
// TLS 1.2 or later; there is no setting to skip verification. Hooks
// without caBundle or clientTLS use the Client's default HTTP client.
// Before reading anything, it checks each hook with its CredentialPolicy:
// the namespaces credentials may come from (a service hook's own, plus a
// list, or all), and no authorization, basicAuth or clientTLS over plain
// http unless allowed. The manager checks every hook of a controller with
// the same policy before the controller starts.
// These settings are read from the webhook only: a controller's
// endpointConfigs reach a webhook through v1alpha1's defaulting, which
// copies the entry of the webhook's host into each webhook that sets none
// of the four settings itself; the controllers call hooks with the
// defaulted copy of their spec.
//
// WatchingCredentialSource is the CredentialSource for a cluster: it
// watches each referenced Secret or ConfigMap on its own (an informer
// restricted to its namespace and metadata.name, never a list of all
// Secrets), answers from that cache, and reports changes through OnChange.
// Credentials are read again on every call, so a rotated token is sent on
// the next call, and a rotated CA bundle or client certificate gives a new
// HTTP client, the idle connections of the old one being closed, without
// restarting anything.
//
// No message of this package holds a credential: a CredentialError names
// the setting and where it was looked up (kind, namespace, name, key),
// never the content, and URLs are shown as redact.URL writes them.
// SecureTransport, WatchingCredentialSource and CredentialHealth are safe
// for concurrent use.
package credentials
