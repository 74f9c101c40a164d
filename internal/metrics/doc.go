// Package metrics defines metactl's Prometheus metrics, all prefixed
// metactl_, in one registry (Registry). Their users record directly on the
// exported metric vectors: the work queue (internal/loop) Syncs and
// SyncDuration; the engine (internal/engine), pkg/composite and the
// packages that write (pkg/dynamic/children, pkg/dynamic/ownership)
// ObjectWrites, UncachedReads and UnsettledSyncs; internal/manager
// ControllerReady, HookTimeout and Leader; internal/shard the Shard
// metrics. The hook client records through
// ObserveHookCall, which internal/manager gives it as its Observer; the count
// of cached objects is read at each scrape from the function
// SetInformerCounter sets, and the sharded caches' filter modes and
// objects per bucket from those SetShardFilterModes and
// SetShardBucketCounts set. internal/manager calls Register, and cmd/metactl
// serves Registry over HTTP at /metrics.
//
// internal/manager calls ForgetController once a controller object is gone,
// deleting every series labelled with its name; a hook's HTTP status is
// kept to a bounded set of code labels (HookCode).
//
// Register also installs client-go's work-queue metrics provider, so the
// queues of every controller (depth, adds, retries, latency) are counted
// without the reconcilers doing anything; InstrumentTransport counts API
// requests by verb and code at the HTTP layer.
//
// Everything here is safe for concurrent use.
package metrics
