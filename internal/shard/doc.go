// Package shard splits the objects metactl watches into a fixed number of
// buckets, so that several replicas can share the work: each replica
// reconciles, and caches, only the objects of the buckets it owns.
//
// # Buckets
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
// Cluster-scoped objects have no namespace; they are not split. The
// controllers of cluster-scoped parents run whole on the one replica that
// holds the cluster bucket, a bucket beside the hash buckets.
//
// # Members and ownership
//
// A Coordinator shares the buckets with the other replicas through Leases
// in one namespace, all named after Options.Name (docs/scaling.md):
//
//   - Name-member-<hash of identity>: one per replica, renewed every
//     RetryPeriod, labelled MemberLabel and annotated BucketsAnnotation.
//     A member is live while its Lease has changed within the lease
//     duration, timed by this replica's clock from when it saw the change
//     (clocks need not agree); members announcing another number of
//     buckets are ignored, with an error in the log and
//     metactl_shard_members_ignored. A member Lease unchanged for ten lease
//     durations (a replica killed) is deleted by the others.
//   - Name-bucket-<i> and Name-bucket-cluster: one per bucket, held by the
//     replica that works on it, labelled BucketLabel. Each round lists
//     them all, so a replica times a bucket Lease from its last change
//     even before the bucket is assigned to it: a killed replica's
//     buckets are taken about one lease duration after it stopped
//     renewing, not two.
//
// Every replica assigns each bucket to a live member by rendezvous hashing
// (Assign): every replica that sees the same members computes the same
// assignment, and a member joining or leaving moves only the buckets it
// gains or had. Replicas may disagree for a while about the members; a
// bucket still moves only through its Lease, which every write changes
// with a resourceVersion precondition, so at most one replica holds it.
//
// # Handover
//
// A bucket is active on a replica while its Gate admits it: the engine
// queues only what Admits accepts and starts each sync through Begin,
// which refuses inactive buckets and counts the sync until its done.
//
//   - Taking: the Lease first (absent, without holder, or unchanged for
//     the lease duration); then Options.Hold with the larger set (the
//     caches list and sync); then the bucket is activated and
//     Options.Activated told, to queue its cached parents (and to start
//     the controllers that run whole, for the cluster bucket).
//   - Giving up (assigned elsewhere, or Run ending): the bucket is
//     deactivated; its syncs in flight may finish until StopGracePeriod,
//     then their contexts are cancelled and they get CancelWait more;
//     then Hold with the smaller set, then Options.ReleaseCluster for the
//     cluster bucket; only then is the Lease's holder emptied, and the
//     gainer may take it at once.
//   - Losing: a Lease not renewed for RenewDeadline, shorter than the
//     lease duration, or found held by another, is deactivated at once
//     with its syncs' contexts cancelled before any other replica may
//     take it, and forgotten without a write.
//
// So no bucket is ever active on two replicas at once, and a replica
// starts a bucket's parents only after its predecessor's syncs of them
// ended (given up) or were cancelled at its renew deadline (lost).
//
// The Coordinator renews its Leases on a goroutine of its own and
// checks the renew deadline on another, so that handovers waiting on
// syncs or caches delay neither. Metrics: metactl_shard_bucket_owned,
// metactl_shard_members, metactl_shard_members_ignored and
// metactl_shard_handovers_total (internal/metrics).
//
// Of metactl the package imports only internal/metrics.
package shard
