// Package integration holds tests of the API machinery that belong to no
// single package: the CRDs as a real kube-apiserver serves them, and kubectl's
// view of them. Each controller package keeps its own integration tests.
package integration
