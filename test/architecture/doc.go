// Package architecture checks docs/architecture.md against the code: its
// table of packages must be the import graph that `go list` shows (a test,
// with no control plane).
package architecture
