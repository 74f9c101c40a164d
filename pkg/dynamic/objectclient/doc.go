// Package objectclient reads and writes objects of any resource through the
// API server's REST API, as informer.Objects.
//
// A Client lists and watches a resource for the cache (ListerWatcher, an
// informer.ListerWatcherFunc) and writes objects: Create, Update, Patch
// (of an object or of a subresource such as status), Apply (server-side
// apply) and Delete; GetMetadata reads one object's whole metadata. It
// guarantees:
//
//   - What the server sends is decoded straight into informer.Objects: a
//     list item by item, a watch event with a scan of its envelope, a
//     write's answer with a scan of its JSON; in each, only an object's
//     metadata is decoded. A response that is not a JSON object, or whose
//     metadata does not decode, is an error.
//   - An error from the server is an *apierrors.StatusError, with the
//     server's Status (message, reason, causes) when it sent one, as from
//     client-go's clients; a watch's error event carries a *metav1.Status.
//   - A write's body is sent as the caller gives it, with the content type
//     of its kind (JSON, or the patch type); the only body the Client
//     encodes is Delete's options.
//   - With the Warnings option, the API server's warnings about a write
//     (Create, Update, Apply, Delete) go to the given handler, during that
//     write's call; other requests' warnings, and Patch's, go to the
//     rest.Config's warning handler (client-go's default when it has
//     none).
//   - Requests go through the given http.Client, and are limited by the
//     rest.Config's RateLimiter or, when it has none, by a token bucket of
//     this Client's own with the rest.Config's QPS and Burst.
//
// ListerWatcher sends the ListOptions it is given, shardSelector included,
// and its lists keep the response's metadata (shardInfo, when the API
// server filtered by the selector): the informer factory's caches per
// bucket read it. Its ListerWatchers are informer.KeepingListers: a list
// through ListKeeping is read as a stream, in chunks, and builds only the
// items whose namespace the caller keeps, reading the others' namespace
// from their JSON and nothing else of them (informer.ListBuilder), so
// that a list the server did not filter costs the set's objects and
// never holds the whole response. shard_integration_test.go checks
// it against a whole list on kube-apiserver without the gate. shard_integration_test.go checks, on kube-apiserver with
// and without the ShardedListAndWatch gate, that the server's
// shardSelector selects by internal/shard's hash.
//
// A Client is safe for concurrent use. The package imports, of metactl,
// pkg/dynamic/informer (for Object) and internal/jsonscan.
package objectclient
