/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package hooks is metacontroller's hook protocol: the requests of sync,
// finalize and customize hooks and their answers, how requests are encoded
// (EncodeRequest) and answers decoded and checked (Response), and the
// defaults of a webhook's settings that decide how it is called (Timeout,
// ResponseMode). It sends nothing: pkg/hooks/hookclient calls the webhooks,
// and pkg/hooks/credentials supplies their transport security and
// credentials.
//
// # Protocol
//
// A hook is called with an HTTP POST of a JSON request at the webhook's
// address (v1alpha1.Webhook.Address: its url, which wins over a service,
// or the service's address and path); only an HTTP 200 answer with a JSON
// response is a success (and, with etag, a 304 or 412: see
// pkg/hooks/hookclient). The request and response types mirror the wire
// format field by field:
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
// bodies: EncodeRequest writes byte for byte what json.Marshal writes.
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
package hooks
