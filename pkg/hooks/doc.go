/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package hooks speaks metacontroller's hook protocol: it encodes the
// requests of sync, finalize and customize hooks, calls the webhooks, and
// decodes and checks their answers.
//
// # Protocol
//
// A hook is called with an HTTP POST of a JSON request at the webhook's
// address (v1alpha1.Webhook.Address: its url, which wins over a service,
// or the service's address and path); only an HTTP 200 answer with a JSON
// response is a success (and, with etag, a 304 or 412: see below). The request and response types
// mirror the wire format field by field:
//
//   - CompositeSyncRequest / CompositeSyncResponse: the sync and finalize
//     hooks of a CompositeController
//     ({"controller","parent","children","related","finalizing"} →
//     {"status","children","resyncAfterSeconds","finalized","events"}).
//   - DecoratorSyncRequest / DecoratorSyncResponse: the sync and finalize
//     hooks of a DecoratorController
//     ({"controller","object","attachments","related","finalizing"} →
//     {"labels","annotations","status","attachments","resyncAfterSeconds","finalized","events"}).
//     "events" is metactl's addition: Events to record on the parent or
//     object, checked whole by CheckEvents.
//   - CustomizeRequest / CustomizeResponse: the customize hook
//     ({"controller","parent"} → {"relatedResources"}).
//
// The "controller" sent is the CompositeController or DecoratorController
// as the user wrote it, not the defaulted copy the controllers work with.
//
// # Keying of observed objects
//
// Observed objects travel in an ObjectMap. Its outer key is
// "<Kind>.<version>" for the core group ("ConfigMap.v1") and
// "<Kind>.<group>/<version>" otherwise ("Deployment.apps/v1"); every
// declared resource has a key, with {} when it has no objects (EnsureKey).
// The inner key depends on the hook's version (ObjectKey):
//
//   - v1 keys an object by its name, except a namespaced object under a
//     cluster-scoped parent, keyed by "namespace/name".
//   - v2 keys every namespaced object by "namespace/name" and every
//     cluster-scoped one by its name.
//
// Requests are encoded with sorted map keys, so equal requests give equal
// bodies.
//
// # Decoding responses
//
// Responses are decoded with case-sensitive keys and integers kept as
// int64, as Kubernetes expects of unstructured objects. In loose mode
// (default for v1 hooks) unknown fields are ignored, but the unknown
// top-level keys of a sync answer are listed in its UnknownFields, each
// with the key it most likely misspells (Suggest), for the controller to
// report; in strict mode
// (default for v2) unknown and duplicate fields of the response envelope
// (and of the rules of a customize response) are errors. The content of
// returned objects is never checked for unknown fields: they are arbitrary
// objects. In both modes:
//
//   - the body must be a JSON object (a literal null is refused rather than
//     read as "no children");
//   - a status must be an object or null; null or absent means {} for a
//     CompositeController and "leave the status alone" for a
//     DecoratorController (a nil DecoratorSyncResponse.Status);
//   - a null or missing list of children or attachments gives no
//     objects; a missing one is flagged (ChildrenAbsent,
//     AttachmentsAbsent) so that the controller can tell it from an empty
//     list; each entry must be an object with a non-empty apiVersion,
//     kind and metadata.name;
//   - "events", when present, must pass CheckEvents (at most MaxEvents
//     entries, each with a type Normal or Warning and a reason without
//     white space); a long message is cut;
//   - in a decorator response, a label or annotation whose value is null
//     is to be removed (a nil *string in the map), while keys not in the
//     map are left alone;
//   - every relatedResources rule must pass
//     v1alpha1.ValidateRelatedResourceRule.
//
// # Errors
//
// Call returns one of five error types, so the caller can react to each:
//
//   - *UnreachableError: the hook could not be reached or did not answer
//     in time: refused connection, DNS or TLS failure, the hook's timeout
//     (which bounds the whole call, reading the body included), or a
//     connection closed or reset by the hook before its answer was
//     complete (it crashed, most likely: the message says so, and
//     ClosedByHook tells). IsUnreachable tells.
//   - *StatusError: the hook answered with a status other than 200 (or
//     than 304 and 412 to a request carrying If-None-Match). It
//     carries the code, the start of the body (at most 1 KiB) and, for a
//     429 with a Retry-After header in seconds or as an HTTP date, the
//     delay asked for (see RetryAfter). A redirect (301, 302, 303, 307,
//     308) is one too: no client follows redirects, and the error names
//     the Location (see StatusError.Location).
//   - *ResponseError: the hook answered 200 with an unusable body: larger
//     than Options.MaxResponseBytes, estimated to take more than
//     Options.DecodedBudgetBytes once decoded, not JSON, with an unknown
//     field in strict mode, a status that is not an object, or an invalid
//     child.
//   - *BudgetError: the hook answered 200, but its answer found no room
//     within the hook's timeout in the budget of all hook answers as read
//     (Options.ResponseBudgetBytes) or decoded (Options.DecodedBudgetBytes);
//     the message names the flag (--hook-response-budget-bytes,
//     --hook-decoded-budget-bytes).
//   - *CredentialError (wrapped; IsCredentialError tells): a credential or
//     trust setting of the webhook cannot be used, and the hook was not
//     called: its Secret, ConfigMap or key is missing or may not be read,
//     or its content is malformed. It names the setting and the reference
//     (kind, namespace, name, key), never the content, and carries the
//     controller and hook, for a HookAuthError condition. It is also the
//     error of a setting the CredentialPolicy refuses (Refused tells). A server
//     certificate that does not verify against the CA bundle is an
//     *UnreachableError wrapping a *tls.CertificateVerificationError.
//
// A misconfigured webhook, a request that cannot be encoded, or a context
// cancelled by the caller give a plain error (the last wraps the context's
// error). Every message names the hook and the webhook's URL, but not the
// controller (the errors carry it in a field): the caller says which
// controller, once. URLs are shown with their user information and query
// values redacted (redact.URL), so no credentials appear.
//
// # Guarantees
//
// Call never retries: the caller decides what to do with a failure (a sync
// error retries the object with backoff and applies nothing; a 429
// requeues it after the delay). A Client is safe for concurrent use and its
// calls share one connection pool: by default the one of
// DefaultHTTPClient, which verifies certificates, requires TLS 1.2 or later
// and keeps many idle connections per host. A response body is never
// buffered beyond the limit (plus one byte to detect it).
//
// # ETag caching
//
// Only for a webhook with etag.enabled, Call remembers, per webhook URL and
// request body (by hash), the last valid 200 answer that carried an ETag
// header. The next identical request sends If-None-Match with that ETag; a
// 304 Not Modified or a 412 Precondition Failed answer (metacontroller
// reads both as "the ETag still matches") is then decoded from the
// remembered body and is a success, exactly as the 200 was (a 304 or 412
// to a request without If-None-Match is a *StatusError). A request that
// differs in any byte, for example because a child changed, is not
// revalidated. An entry expires etag.cacheTimeoutSeconds (default 60;
// never when below 1) after the 200 that brought it; expired entries are
// dropped when looked up, and all of them at most every
// etag.cacheCleanupSeconds (default 300; a hook with a value below 1 asks
// for no such sweep), without a goroutine. A 200 without ETag, or an
// invalid answer, drops the entry. The cache of a
// Client holds at most Options.EtagCacheMaxEntries answers (default
// 10,000) and Options.EtagCacheMaxBytes (default 256 MiB), the least
// recently used going first.
//
// # Transport security and credentials
//
// Per-webhook transport settings and credentials plug in through
// Options.Transport (an *http.Client per hook; a ContextTransportResolver
// gets the call's context) and Options.PrepareRequest (headers of each
// request). SecureTransport is both: it reads caBundle (inline, or from a
// Secret or ConfigMap), clientTLS, authorization (any scheme but Basic,
// Bearer by default) and basicAuth from a CredentialSource, keeps one HTTP client per distinct TLS material
// so that connections are reused, and always verifies certificates with
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
package hooks
