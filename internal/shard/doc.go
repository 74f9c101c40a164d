// Package shard splits the objects metactl watches into a fixed number of
// buckets, so that several replicas can share the work: each replica
// reconciles, and caches, only the objects of the buckets it owns.
//
// An object's bucket is decided by its namespace alone: the 64-bit FNV-1a
// hash of the namespace, cut into Buckets equal ranges (Of). A namespaced
// parent's children, orphans, ControllerRevisions and attachments live in
// its namespace, so they fall in the parent's bucket, and one filter per
// replica (a Set) serves every informer. The hash and the ranges are those
// of the API server's shardSelector (KEP-5866, ShardedListAndWatch): a
// Set's Selector is the selector for its ranges, so the API server can
// filter lists and watches itself, and Contains is the same rule on the
// client side for servers that cannot. The number of buckets is fixed per
// install: an object's bucket never changes, and adding or removing a
// replica moves whole buckets.
//
// Cluster-scoped objects have no namespace; they are not split (see
// docs/scaling.md for the rule for cluster-scoped parents).
//
// The package imports nothing of metactl.
package shard
