// Package hooktest is `metactl hook test`: a conformance kit for the hooks
// of a CompositeController or DecoratorController, in any language. It
// sends a hook valid requests that exercise the protocol's edge cases and
// reports what the hook gets wrong, one Finding per problem with its fix.
//
// Nothing here is a second copy of metactl's rules. The controller is
// built by composite.New or decorator.New (its spec checked, its
// resources resolved through a discovery.ResourceMap: the cluster's, or
// OfflineResources); the requests are made by the reconciler's own
// engine.Sync (the kind's Offline seam) and pkg/hooks' types and
// ObjectMapOf; the hooks are called by a hookclient.Client, which decodes the
// answers as the reconciler's does (strict or loose); an answer's list of
// children is checked by Answers.CheckList and Sync.Desired, as a sync
// checks it; the rounds of a sync are played with controller.AsAnswered
// and children.Decide (children.Writer.Manage's choice for each child:
// create, update by apply's three-way merge, recreate, keep, delete), to
// hand the hook back its own children and status as the reconciler
// would, in the sync rounds and in the finalize rounds alike; a created
// child's name is checked by children.CheckName, the writer's rule; a made-up related object is put in the namespace the related
// resolver selects in (related.Namespace). What is this package's own:
// which requests to send (see Run and docs/hook-test.md); the writes
// themselves, played without an API server (the fields the server would
// set, uid, resourceVersion, creationTimestamp, are made up, and no
// defaulting or admission happens); the checks no sync makes
// (determinism, finalized, the fixed point, the timeout as a finding);
// and the names of the checks.
//
// Findings compare answers with internal/jsondiff, lists of children and
// attachments as sets (jsondiff.ByObjectKey).
package hooktest
