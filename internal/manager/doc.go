// Package manager runs metactl: it watches CompositeController and
// DecoratorController objects and runs one controller per object,
// restarting only that controller when its spec or its
// metactl.io/service-account annotation changes and stopping it when the
// object is deleted; the process itself never restarts for either.
//
// The manager owns what is shared by every controller: the API server's
// clients (one HTTP client and one QPS and burst budget for all), discovery
// (refreshed at once when a CRD changes), the informer factory, the hook
// client and the credentials its hooks use, and the Event recorder; it
// registers metactl's metrics (internal/metrics). Before it starts a controller
// it checks its hooks' credentials against the credential policy
// (Options.CredentialNamespaces, Options.AllowInsecureCredentials;
// Ready=False CredentialNotAllowed or InsecureCredentials), then, with
// internal/rbac, that metactl may do what the controller needs.
// A controller object annotated metactl.io/service-account: <ns>/<name>
// makes its writes (and uncached reads) as that ServiceAccount, through
// clients that impersonate it on the shared HTTP client and rate limiter,
// one set per account while a controller uses it; before it starts, the
// manager checks that metactl may impersonate the account and that the
// account may get each credential Secret and ConfigMap its hooks name
// and read what the controller reads (SubjectAccessReviews): everywhere
// for a controller of cluster-scoped parents; for one of namespaced
// parents, in each parent's namespace before its sync
// (engine.Options.MayServe), so that it is served only the namespaces its
// account may read; the controller checks each related resource likewise
// before it serves it;
// while it runs, these checks are made again once per
// Options.AccountReviewTTL, and a refusal stops it (Ready=False
// Forbidden). Events and the controller object's status stay metactl's.
// It reports each controller's state on its object: status.observedGeneration
// and a Ready condition that is True once the controller runs with synced
// caches, or False with a reason (InvalidSpec, UnknownResource, Forbidden,
// HookAuthError, ...) and a message saying what is wrong. A controller
// waiting for an unknown resource starts as soon as discovery sees it.
// While a controller runs, status.failingObjects counts its objects whose
// last sync failed and a Synced condition names a few of them with an
// error, so that `kubectl get cc` shows a controller that runs (Ready=True)
// but fails for its parents; these change on the object at most once per
// FailingStatusInterval, however many syncs fail.
//
// Deleting a controller object with a finalize hook waits until the
// manager has removed the controller's finalizer from its parents. It never
// hangs: a parent resource no longer served has nothing to remove, and a
// cleanup that keeps failing (Ready=False CleanupFailed) gives up after
// Options.CleanupTimeout with a Warning Event saying what may be left.
//
// A controller starts in the background (its caches' first sync bounded by
// Options.StartTimeout; Ready=False StartFailed when it does not make it, then
// started again after a backoff that grows with each failure in a row), so
// that one whose caches never sync holds none of the manager's workers.
// Stopping a controller (a spec or account change, a deletion, shutdown,
// a refused account check) cancels its
// in-flight syncs, whose hook calls end and which write nothing more, and
// waits for them at most Options.StopGracePeriod.
//
// Run returns when its context ends, once every controller has stopped
// so. Under leader election (Options.LeaderElection) only
// the replica holding the Lease runs controllers, and Run returns at once,
// with ErrLeadershipLost, when this replica loses it. Sharded
// (Options.ShardBuckets, docs/scaling.md), every replica runs every
// controller for the parents of the buckets it holds (internal/shard's
// Coordinator and Gate), controllers with a cluster-scoped parent run
// whole on the holder of the cluster bucket, and one replica writes each
// controller object: the leader, or, for a controller that runs whole,
// the cluster bucket's holder.
//
// Where things are:
//
//   - manager.go: Options, New and Run, which watches the controller
//     objects and feeds the manager's queue.
//   - clients.go: the API server's clients, and those of each
//     ServiceAccount controllers act as.
//   - crds.go: the CRD watch that refreshes discovery.
//   - kinds.go: the two kinds of controller object and how a controller is
//     built for each (pkg/composite, pkg/decorator).
//   - reconcile.go: one controller object's reconcile: start (after the
//     permission checks), restart on a new generation or account, stop.
//   - status.go: the object's Ready and Synced conditions and failing
//     objects.
//   - cleanup.go: removing a deleted controller's finalizer from its parents.
//   - events.go: the Event broadcaster and its spam filter.
//   - leader.go: leader election.
//   - sharding.go: sharing the parents among replicas (the coordinator,
//     each controller's gate, who writes each controller object).
package manager
