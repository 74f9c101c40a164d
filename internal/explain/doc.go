// Package explain answers "why did my hook (not) run?" for one parent or
// decorated object: which controller of this metactl manages it, its last
// syncs (internal/history), its current backoff and next attempt, and its
// children or attachments as the cache holds them.
//
// The answer (Answer) is one type that both sides use: metactl serves it
// as JSON at Path on its metrics address (Handler, fed by
// internal/manager.Manager.Explain, which asks each running controller's
// Engine), and `metactl explain` fetches it (Fetch, FetchThroughPods) and
// prints it (Print) or dumps it as JSON or YAML. `metactl run` guards Path
// (internal/debugauth) with Attributes: only a caller who may get the
// object asked about is answered.
//
// Bounds: answering reads the informer caches, the history Store and the
// work queue's bookkeeping only; it never calls a hook or the API server.
// The answer holds object names, the outcome and errors of syncs as
// metactl also puts them in Events (hook and write errors, already
// scrubbed of Secret data), never an object's contents.
package explain
