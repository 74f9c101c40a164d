// Package metrics defines metactl's Prometheus metrics, all prefixed
// metactl_, in one registry. Reconcilers record through the small recorder
// types here; pkg/manager serves the registry over HTTP.
//
// Register also installs client-go's work-queue metrics provider, so the
// queues of every controller (depth, adds, retries, latency) are counted
// without the reconcilers doing anything; InstrumentTransport counts API
// requests by verb and code at the HTTP layer.
//
// Everything here is safe for concurrent use.
package metrics
