// Command soak runs metactl for a while under steady churn and faults, and
// fails when its memory, goroutines or file descriptors grow or when it
// does not converge afterwards (issue 15). It is not part of CI: run it
// with `make soak` (5 minutes of churn), or e.g.
//
//	go run ./test/soak -duration 30m -parents 500 -fail-rate 0.3
//
// It starts a local control plane on loopback (etcd, kube-apiserver and
// kube-controller-manager for garbage collection, from the binaries
// hack/testenv.sh builds), runs `metactl run` as a separate process with
// default flags, and serves a CompositeController's sync hook from this
// process: each SoakParent labelled soak=in gets 3 ConfigMaps carrying its
// spec.value, and a status with the value. A share -fail-rate of the hook's
// calls fail instead, in equal parts: a 500, an answer after the webhook's
// 2-second timeout, invalid JSON, or a slow (1 s) but right answer.
//
// After a warm-up (-parents parents created and converged with a healthy
// hook), the churn runs for -duration at -ops operations per second: a
// parent's spec updated, a parent created or deleted (the count stays near
// -parents), a child ConfigMap edited or deleted behind metactl's back, and
// parents labelled soak=out (outside the controller's scope) created,
// updated and deleted. Every -sample-every it samples metactl's resident
// set (/proc/PID/status), goroutines (go_goroutines on its /metrics), open
// file descriptors and sockets (/proc/PID/fd), and checks that nothing was
// written for an out-of-scope parent.
//
// Then the hook is made healthy and the soak waits for convergence: every
// parent in scope has status.value = spec.value and exactly its 3
// ConfigMaps, right and controlled by it; no ConfigMap is left of a deleted
// parent; none exists or status is written for an out-of-scope parent.
//
// It prints a table of the samples and PASS/FAIL lines, and exits 1 on any
// FAIL: a growth trend (see trend in report.go) or a failed convergence.
// With -heap-profiles (the default) metactl also serves pprof on loopback,
// and its heap profile is saved, after a garbage collection, when the
// churn starts and once everything converged; the report prints the
// `go tool pprof -diff_base` command that shows what its live heap gained.
package main
