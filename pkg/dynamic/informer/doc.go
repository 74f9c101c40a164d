// Package informer is metactl's cache of objects of any resource: informers
// shared among controllers, and the objects they hold.
//
// A Factory holds at most one running informer per GroupVersionResource.
// Controllers Acquire a handle for each resource they watch and Release it
// when they stop; the informer starts on the first Acquire and stops when
// the last handle is released, so resources are watched only while some
// controller needs them, and a controller restarting does not disturb the
// others sharing its informers. A Factory does not talk to the API server
// itself: its informers list and watch through the ListerWatcherFunc it is
// given (objectclient.Client's ListerWatcher in metactl).
//
// Every informer indexes its objects by the UID of their controller owner
// and keeps an index of orphans (objects without a controller owner) by
// namespace. A controller claiming a parent's children reads only the
// parent's own children and the orphans of its namespace, never every
// cached object.
//
// The cache holds each object as an Object: its metadata parsed, the rest
// kept as the JSON the API server sent, without metadata.managedFields
// (they are often the largest part of an object) except the entries of
// metactl's own field managers (OwnManagerPrefix: the controllers that
// apply server-side read them to tell drift from a no-op; an object
// without such an entry costs only a search of its managedFields' JSON). That is about a third of the memory of a decoded object. On the
// watch path an object costs a scan of its JSON and the decoding of its
// metadata: indexes, and event handlers that map an object to queue keys,
// read the parsed metadata. The rest of an object is decoded only when
// something reads it: a controller's sync, or a handler that needs more
// than metadata (OnlyStatusChanged, for one, decodes both versions of an
// update whose metadata is unchanged). Get, List, OwnedBy and Orphans
// return decoded objects, new on every call, that the caller owns; an
// object that does not decode is reported (utilruntime.HandleError) and
// left out. GetMeta, ListMeta, OwnedByMeta and OrphansMeta return the
// cached Objects, which must not be modified; Object.Size estimates what
// one takes as JSON, so that a caller can count before it decodes.
//
// Metadata goes through metav1.ObjectMeta: what it does not know is not
// kept, and timestamps come back as kube-apiserver writes them (RFC 3339,
// seconds, UTC), which is what kube-apiserver sends in the first place.
// Labels and annotations are kept as Pairs, not maps, with the short
// strings many objects repeat interned: selectors match them through
// LabelsOf and AnnotationsOf without building a map.
//
// ObjectOf and OnlyStatusChanged help event handlers read the Objects
// their events carry.
//
// Caches per bucket (docs/scaling.md). A Factory that holds a set of
// buckets (Hold, with Options.Namespaced) keeps in the informers of
// namespaced resources only the objects of the set's namespaces: their
// lists and watches carry the set's shardSelector, and every object the
// server sends outside the set is dropped before the cache (a server
// without the ShardedListAndWatch gate sends everything; FilterModes says
// which resources the server filters): in a list, before it is decoded
// when the ListerWatcher is a KeepingLister (ListBuilder reads an item's
// namespace from its JSON), else once decoded. Cluster-scoped resources,
// and the whole informers of AcquireWhole, are never filtered. A Factory that
// never held a set makes the requests and caches the objects it always
// did. When the set changes, each informer lists again into a new store,
// which replaces the old once synced; the handlers added through
// Informer.AddEventHandler keep running and are told only what changed
// (Hold says what they see).
//
// Factory and Informer are safe for concurrent use, and so is reading an
// Object (nothing writes one once it is built). The package
// imports nothing of metactl but internal/jsonscan and internal/shard.
package informer
