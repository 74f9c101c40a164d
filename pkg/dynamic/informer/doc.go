// Package informer shares dynamic informers among metactl's controllers.
//
// A Factory holds at most one running informer per GroupVersionResource.
// Controllers Acquire a handle for each resource they watch and Release it
// when they stop; the informer starts on the first Acquire and stops when
// the last handle is released, so resources are watched only while some
// controller needs them, and a controller restarting does not disturb the
// others sharing its informers.
//
// Every informer indexes its objects by the UID of their controller owner
// and keeps an index of orphans (objects without a controller owner) by
// namespace. A controller claiming a parent's children reads only the
// parent's own children and the orphans of its namespace, never every
// cached object.
//
// The cache holds each object as an Object: its metadata parsed, the rest
// as the JSON the API server sent, without metadata.managedFields (metactl
// does not read them, and they are often the largest part of an object).
// That is about a third of the memory of a decoded object, and no decoding
// on the watch path: event handlers, indexes and selectors read the parsed
// metadata, and an object is decoded only when a controller reads it. Get,
// List, OwnedBy and Orphans return decoded objects that the caller owns;
// GetMeta and ListMeta return the cached Objects, which must not be
// modified.
//
// Metadata goes through metav1.ObjectMeta: what it does not know is not
// kept, and timestamps come back as kube-apiserver writes them (RFC 3339,
// seconds, UTC), which is what kube-apiserver sends in the first place.
//
// Factory and Informer are safe for concurrent use.
package informer
