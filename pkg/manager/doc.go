// Package manager runs metactl: it watches CompositeController objects and
// runs one controller per object, restarting only that controller when its
// spec changes and stopping it when the object is deleted; the process
// itself never restarts for either.
//
// The manager owns what is shared by every controller: the API client (its
// QPS and burst), discovery, the informer factory, the hook client, the
// Event recorder and the metrics registry. It reports each controller's
// state on its object: status.observedGeneration and a Ready condition that
// is True once the controller runs with synced caches, or False with a
// reason (InvalidSpec, UnknownResource, ...) and a message saying what is
// wrong. A controller waiting for an unknown resource starts as soon as
// discovery sees it. While a controller runs, status.failingObjects counts
// its objects whose last sync failed and a Synced condition names a few of
// them with an error, so that `kubectl get cc` shows a controller that runs
// (Ready=True) but fails for its parents; these change on the object at
// most once per FailingStatusInterval, however many syncs fail.
//
// Deleting a controller object with a finalize hook waits until the
// manager has removed the controller's finalizer from its parents. It never
// hangs: a parent resource no longer served has nothing to remove, and a
// cleanup that keeps failing (Ready=False CleanupFailed) gives up after
// Options.CleanupTimeout with a Warning Event saying what may be left.
//
// Run returns when its context ends, after every controller has finished
// its in-flight syncs.
package manager
