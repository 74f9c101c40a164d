// Command bench measures how fast and how cheaply metactl converges N
// parents of a CompositeController, against the limit of the API server it
// talks to, measured in the same run (issue 4).
//
// It starts a local control plane (etcd, kube-apiserver and
// kube-controller-manager for garbage collection, from the binaries
// hack/testenv.sh builds), builds `metactl run` from the tree and runs it as
// a separate process with default flags, and serves the CompositeController's
// sync hook from this process. Each BenchParent asks for 3 ConfigMaps
// carrying its spec.value; its status reports the value and the number of
// ConfigMaps the hook observed.
//
// Phases:
//
//   - limit: the same object writes metactl must make (per parent: create the
//     parent, create 3 ConfigMaps, write status; then patch the parent's
//     spec, update 3 ConfigMaps, write status; then delete), issued directly
//     by a client with no rate limit, once with each writer count of
//     -limit-writers (16, 64, 256); the fastest is the limit of the round.
//     Nothing but the control plane watches these objects.
//   - create, update, delete: the same with metactl doing the work, timed
//     from the first write until informers in this process see every parent
//     converged (status and all 3 ConfigMaps right; for delete: parent and
//     ConfigMaps gone).
//   - cache: metactl's RSS before and after -cached-children orphan
//     ConfigMaps appear (metactl caches every ConfigMap).
//
// The limit and metactl run in alternating rounds (-runs: limit, metactl
// create and update, limit, metactl, ...) on one control plane; the targets
// are decided on the medians over the rounds. Every run's counts are
// checked by independent witnesses (metactl's metrics, the hook server's
// count, kube-apiserver's apiserver_request_total) and a disagreement fails
// the run. -counts-only keeps the counts and convergence and drops the
// speed, CPU and memory targets (CI runs it at N=200).
//
// Variants (-variant NAME=SPEC, repeatable, e.g. -variant
// ssa=--apply-strategy=server-side -variant trace=+otlp) measure other
// ways of running metactl (flags, environment, +otlp for tracing to a
// receiver in the benchmark, bin=PATH for another build such as a baseline
// commit's) side by side with the default flags, in the
// same rounds, each variant in a fresh metactl process per round, in an
// order that rotates each round. Their counts and hook call and write
// targets are judged as the default's, and +otlp variants must export a
// sync span for every sync; speed, CPU and memory are judged for the
// default variant only. With variants, the result's metactl process
// figures (metactlPid, metactlArgs, metactlIdle, metactlAfterPhases,
// metactlEnd) are those of the default's process of the last round, which
// also runs the delete and cache phases. docs/performance.md, "Variants",
// describes SPEC, the rounds and the results; variant.go implements them.
//
// Replicas (issue 31, docs/scaling.md; replicas.go): -replica-counts 1,2,4
// (or -replicas K) adds a variant r<K> for each count: K metactl
// processes started with --leader-elect --shard-buckets=B
// (-shard-buckets, 32) and Leases named for the run, which share the
// parents among themselves. They run in the same rotating rounds as the
// variants, beside the default, after the replicas' bucket ownership has
// settled (metactl_shard_bucket_owned, when exported). With replicas the
// parents are spread over -namespaces namespaces (100) with generated
// names, which spread over the buckets where sequential ones would not
// (namespaces.go); -sharded-list-and-watch starts kube-apiserver with
// the ShardedListAndWatch feature gate (one control plane per run: the
// gate on and off are two runs). The counts are checked over the
// replicas together (their metrics added up; the write requests beyond
// object writes are their Lease writes, at most those kube-apiserver
// served), and the replicas are quiet when no hook call, object write
// or sync happened for a second (their Lease renewals never stop). Per
// replica each phase records CPU, peak RSS, hook calls,
// cached objects (metactl_informer_objects) and, when metactl exports a
// counter of them, watch events received; each variant's result has the
// largest and median share over the replicas of each round and their
// ratio to one replica's (r1 when measured, else the default). The hook
// server records each call's parent, time and Metactl-Replica header:
// a parent called by two replicas with overlapping calls, or by A, then
// B, then A, is a double sync (doublesync.go; "unknown", not 0, when the
// header is missing). -kill-one SIGKILLs one replica after each update
// wave of 2 or more, updates every parent again and times, from the
// kill, until every parent converged and every parent of the killed
// replica's buckets was called and converged, against the lease duration
// (-lease-duration, 15s) + 10 s (kill.go).
//
// -apiserver-profile also saves CPU profiles of kube-apiserver over round
// 1's create phases, the limit's and metactl's, in windows of the same
// length (apiprofile.go): what serving each costs the server.
//
// It prints a table and PASS/FAIL lines for the targets of issues 4 and
// 15, exits with status 1 when a target fails, and writes a JSON file
// (-out) and optionally an SVG plot (-svg). Run it with `make bench`, or
// e.g.
//
//	go run ./test/bench -n 1000 -out test/bench/results/n1000.json
//
// See docs/performance.md.
package main
