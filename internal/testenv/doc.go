// Package testenv starts a real control plane for a test package: etcd and
// kube-apiserver through controller-runtime's envtest, optionally
// kube-controller-manager for garbage collection, with metactl's CRDs
// installed.
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
package testenv
