// Package metrics defines metactl's Prometheus metrics, all prefixed
// metactl_, in one registry. Reconcilers record through the small recorder
// types here; pkg/manager serves the registry over HTTP.
//
// Register also installs client-go's metrics adapters, so API requests (by
// verb and code) and work queues (depth, adds, retries, latency) of every
// controller are counted without the reconcilers doing anything.
//
// Everything here is safe for concurrent use.
package metrics
