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
//   - ownership (claiming children), apply (the three-way merge), children,
//     finalizer and status: the writes a sync makes.
//
// Of metactl, informer imports only internal/jsonscan (the JSON scanner it
// shares with objectclient); objectclient imports informer and
// internal/jsonscan; echo and apply import nothing.
package dynamic
