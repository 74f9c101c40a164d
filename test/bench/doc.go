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
// Variants (-variant NAME=SPEC, repeatable) measure other ways of running
// metactl side by side with the default flags, in the same rounds, e.g.
//
//	-variant ssa=--apply-strategy=server-side -variant trace=+otlp
//
// SPEC is split at spaces (no quoting): words starting with "-" (and a
// word without "=" after one, its value) are added to `metactl run`'s
// arguments; UPPER_CASE=value words to its environment; +otlp turns
// tracing on: the benchmark starts an OTLP/HTTP receiver in its process
// (internal/otlptest) and sets OTEL_EXPORTER_OTLP_ENDPOINT to it. Every
// variant's metactl, the default's included, runs without any OTEL_
// variable of the benchmark's own environment, so tracing is on only
// where a variant turns it on. With variants, each round is the limit,
// then each variant in turn, the default ("default") among them; the order
// rotates by one each round, so that with -runs a multiple of the number
// of variants each runs once in each place, and the last round ends with
// the default. Each variant's run gets a metactl process of its own,
// started for it and quiet before the CompositeController is created (only
// one metactl may run at a time, since each would serve the same
// controller, and a fresh process for every variant and round, the
// default's included, gives all the same start: no variant inherits
// another's caches or heap), then create and update with their counts
// checked three ways as above (a server-side apply is a PATCH of metactl's
// client and APPLY in kube-apiserver's count), then the controller,
// parents and children are removed and the process stopped; stopping it
// exports the spans it still holds. The default's process of the last
// round runs on for the delete and cache phases. The results (the JSON's
// "variants", and a section of the printed report) give per variant: the
// ratio of its median to the limit's with each round's ratio and the
// spread of its seconds, hook calls and writes per parent by verb
// (metactl's and kube-apiserver's), CPU for create and update (median
// over the rounds), peak RSS (median VmHWM of its processes after create
// and update, leaving out profiled ones when others exist), and with
// +otlp the spans exported during create and update, with the sync spans
// among them against metactl's count of syncs (fewer means the exporter
// dropped spans, or a sampler left syncs out). Counts must agree, hook calls and writes stay within
// the default's targets, and a variant with +otlp must export spans in
// every run, or the benchmark fails; the speed, CPU and memory targets
// judge the default variant only, the others' are reported. Without
// -variant, one metactl process runs throughout, as described above.
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
