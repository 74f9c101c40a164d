// Package metactlrun starts and stops `metactl run` as a separate process
// for the benchmark (test/bench) and the soak (test/soak): default flags
// apart from where it finds the cluster and where it serves metrics, health
// and (when the binary has the flag) pprof, each on a free loopback port.
//
// Guarantees: Start returns only once metactl answers /readyz with 200 (or
// fails within 2 minutes, or when ctx ends, stopping what it started); the
// process runs in a process group of its own and is killed by the kernel if
// the caller dies; Stop ends it with SIGTERM, then SIGKILL after 10
// seconds, and is idempotent.
package metactlrun
