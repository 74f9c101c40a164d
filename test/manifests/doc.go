// Package manifests tests the installation manifests in manifests/: what
// `kubectl kustomize manifests` renders, `kubectl apply -k manifests
// --dry-run=server` against a real API server, and the shipped RBAC, by
// impersonating the metactl ServiceAccount and running the metactl binary
// under its permissions.
package manifests
