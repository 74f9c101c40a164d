// Package e2e runs metactl as users do: the metactl binary built from this
// tree as a separate process against a real control plane, with example
// hooks running as real python3 and node processes.
package e2e
