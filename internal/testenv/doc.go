// Package testenv gives a test package a real control plane (see
// internal/controlplane: etcd, kube-apiserver, optionally
// kube-controller-manager, with metactl's CRDs installed) and clients for it.
//
// The binaries come from hack/testenv.sh, which builds them from the Go
// module proxy into a cache folder outside the repository. They are found
// through $KUBEBUILDER_ASSETS, or else in the folder hack/testenv.sh would
// print. When they are missing, Start fails with a message naming the
// command that builds them; tests never skip for want of a control plane.
//
// One control plane serves a whole test package: start it in TestMain with
// Main, which stops it on every path out of the package (normal exit, a
// panic in TestMain, SIGINT or SIGTERM, and shortly before the go test
// -timeout would kill the binary), so that no etcd or kube-apiserver
// outlives the tests. Tests share it and isolate themselves with namespaces
// from CreateNamespace.
//
// In pkg/ and internal/, that TestMain and the tests that use the control
// plane are in files built only with -tags integration (their first line
// is //go:build integration), which make test passes: plain
// go test ./pkg/... ./internal/... runs the other tests, without a control
// plane, in seconds (test/architecture checks that it never imports this
// package). test/ packages need no tag.
package testenv
