// Package dynamic groups what metactl needs to work with resources it knows
// only at run time, by apiVersion and resource name. Each part lives in its
// own sub-package; this package holds no code.
//
//   - discovery: apiVersion and resource to kind, scope and subresources.
//   - informer: the cache, informers shared among controllers and started
//     and stopped at run time, holding objects as parsed metadata plus JSON.
//   - objectclient: the client that lists, watches and writes objects, as
//     the cache's Objects.
//   - echo: which watch events are the echoes of a controller's own writes.
//   - ownership: which objects are a parent's children; adopting and
//     releasing them.
//   - apply: the three-way merge that updates a child.
//   - children: a hook's children (attachments) checked and written, per
//     update strategy.
//   - finalizer: adding and removing a controller's finalizer.
//   - status: replacing an object's status.
//   - secretdigest: a Secret's data values replaced by digests.
//
// Of metactl, informer imports only internal/jsonscan (the module's JSON
// scanner); objectclient imports informer and internal/jsonscan; children imports apply, discovery,
// informer and objectclient (and the API types, internal/trigger,
// internal/redact and internal/elastic); status imports apply; apply imports secretdigest (and internal/redact);
// ownership imports informer and internal/trigger; echo imports
// internal/trigger; discovery imports internal/editdistance; finalizer
// and secretdigest import nothing. None imports the hook protocol
// or a controller: children and ownership tell of each write through the
// OnWrite function they are given (the engine binds it to the record of
// syncs). docs/architecture.md's table, which test/architecture checks, is
// the rule.
package dynamic
