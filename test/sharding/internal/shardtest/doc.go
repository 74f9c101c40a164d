// Package shardtest is the end-to-end test of sharding (docs/scaling.md)
// that test/sharding/gateon and test/sharding/gateoff run, each against a
// control plane of its own: kube-apiserver with the ShardedListAndWatch
// feature gate (the API server filters lists and watches) and without it
// (metactl filters).
//
// Several `metactl run --leader-elect --shard-buckets` processes work on
// the parents of one CompositeController, whose hook is an HTTP server in
// the test process (Hook). The hook is the witness: it records every call
// with the parent, the Metactl-Replica header (the calling process) and
// when the call started and ended, independently of anything metactl
// reports. The checks (CheckCalls) read that record: no two replicas call
// for one parent at overlapping times, and a parent that moved from a
// replica is never called for by it again, unless a replica left since
// (then a bucket may move back). WaitCallsMatchLeases then checks the
// record against the bucket Leases: each parent was last called for by
// the holder of its bucket's Lease.
//
// Parents are spread over namespaces with varied names (the start of the
// name differs: FNV-1a's top bits hardly depend on the last bytes, see
// docs/scaling.md, Skew), checked to use most buckets.
//
// Everything waits by polling with a deadline derived from the claim it
// checks (lease duration, relist); nothing sleeps.
package shardtest
