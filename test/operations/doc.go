// Package operations tests what an operator relies on, with metactl run as
// a separate process against a real control plane: leader election between
// replicas, the metrics and health endpoints, and logs that never carry
// Secret data.
package operations
