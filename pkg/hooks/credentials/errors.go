/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"errors"
	"strconv"
)

// CredentialReference names where a credential of a webhook comes from:
// one key of a Secret or ConfigMap, or a value written inline in the hook.
type CredentialReference struct {
	// Kind is "Secret" or "ConfigMap"; empty for an inline value.
	Kind string
	// Namespace and Name name the object.
	Namespace, Name string
	// Key is the key of the object's data; empty when the whole object is
	// meant.
	Key string
}

func (r CredentialReference) String() string {
	if r.Kind == "" {
		return "inline value"
	}
	s := r.Kind + " " + r.Namespace + "/" + r.Name
	if r.Key != "" {
		s += " key " + strconv.Quote(r.Key)
	}
	return s
}

// CredentialError is returned when a credential or trust setting of a
// webhook (caBundle, clientTLS, authorization, basicAuth) cannot be used:
// its Secret, ConfigMap or key is missing or cannot be read, or its
// content is malformed (a PEM bundle without a certificate, a client
// certificate that does not match its key, an empty token). The hook was
// not called. It is also the error of a setting the CredentialPolicy
// refuses (see Refused). Its message names the reference but never the
// content.
//
// The controllers report it with a HookAuthError condition; it usually
// needs a fix by the user rather than a retry, though a Secret created or
// corrected later is picked up without a restart.
type CredentialError struct {
	// Controller and Hook name the call ("sync", "finalize",
	// "customize"); hookclient.Client.Call fills them in (ForCall).
	Controller, Hook string
	// Setting is the webhook field that needs the credential: "caBundle",
	// "clientTLS", "authorization" or "basicAuth".
	Setting string
	// Reference is where the credential was looked up.
	Reference CredentialReference
	// Reason says what is wrong, without the credential's content.
	Reason string
	// Refused is set when the CredentialPolicy refuses the setting
	// (RefusedNamespace, RefusedInsecure): nothing was read or sent, and
	// only a change of the hook or of metactl's flags mends it.
	Refused string
}

func (e *CredentialError) Error() string {
	msg := e.Setting
	if msg == "" {
		msg = "credentials"
	}
	return msg + ": " + e.Reference.String() + ": " + e.Reason
}

// ForCall returns a copy of e naming the call of controller's hook: the
// hookclient.CallError by which hookclient.Client.Call names the error of its
// TransportResolver or RequestPreparer.
func (e *CredentialError) ForCall(controller, hook string) error {
	named := *e
	named.Controller, named.Hook = controller, hook
	return &named
}

// IsCredentialError reports whether err is, or wraps, a *CredentialError.
func IsCredentialError(err error) bool {
	var c *CredentialError
	return errors.As(err, &c)
}
