// Package controlplane starts a local Kubernetes control plane from the
// binaries hack/testenv.sh builds: etcd and kube-apiserver (through
// controller-runtime's envtest, which generates certificates and picks free
// loopback ports), and optionally kube-controller-manager running the
// garbage collector and namespace controllers (Options.GarbageCollector),
// or a one-node cluster (Options.Cluster: kube-controller-manager with its
// default controllers, kube-scheduler, and kwok simulating a node, so that
// Pods become Running and Ready without containers). It installs metactl's
// CRDs and writes a kubeconfig.
//
// Tests use it through internal/testenv; `metactl dev` uses it directly.
// Stop ends every process it started and removes its temporary folder
// (metactl-cp-<pid>-*, holding etcd's data and the certificates). The
// kernel also kills the processes Start starts itself if this process dies
// first; etcd and kube-apiserver, which envtest starts in their own process
// groups, only with Options.TieToThisProcess (which `metactl dev` sets),
// which is why the test runner cleans up after test binaries that die
// (hack/cleanup-testenv.sh). A later Start removes the temporary folders of
// owners that died.
package controlplane
