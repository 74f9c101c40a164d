// Package plan is `metactl plan`: what metactl would do to one parent (or
// decorated object) now, shown without doing it.
//
// A Planner builds each controller that manages the object with the
// reconciler's own code (pkg/composite, pkg/decorator on
// internal/engine's Engine), starts its caches (engine.Engine's
// StartCaches) and runs one sync of the object (Engine.SyncOnce): the
// same observation of children, claims and related objects, the same
// hook calls and checks of the answers, the same rounds to a fixed point
// and the same writes. Every API client of the plan is built from one
// rest.Config whose transport is wrapped by DryRun, the one place that
// makes every write request a server-side dry run (dryRun=All): the API
// server runs admission, defaulting and validation and stores nothing.
// DryRun records each write and its answer; the Report reads them as
// children created, updated, replaced or deleted, with a field diff
// (internal/jsondiff) of the live object against the dry run's result,
// and the labels, annotations, finalizers and status of the object as
// the writes would leave them. Events are collected, not sent.
//
// A parent not yet created (metactl plan -f) is made by a server-side
// apply dry run, which gives it its defaults and a UID; the writes the
// sync makes to it (finalizer, labels, status) cannot be dry-run against
// an object that does not exist, so DryRun answers those itself, by
// applying the patch to the object in memory (Write.Simulated).
package plan
