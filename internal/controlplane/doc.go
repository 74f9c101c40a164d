// Package controlplane starts a local Kubernetes control plane from the
// binaries hack/testenv.sh builds: etcd and kube-apiserver (through
// controller-runtime's envtest, which generates certificates and picks free
// loopback ports), and optionally kube-controller-manager running the
// garbage collector and namespace controllers. It installs metactl's CRDs
// and writes a kubeconfig.
//
// Tests use it through internal/testenv; `metactl dev` uses it directly.
// Stop ends every process it started. kube-controller-manager is also killed
// by the kernel if this process dies first; etcd and kube-apiserver are not
// (envtest starts them in their own process groups), which is why the test
// runner cleans up after test binaries that die (hack/cleanup-testenv.sh).
package controlplane
