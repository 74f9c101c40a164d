// Package history keeps a bounded, in-memory record of each object's last
// syncs, for `metactl explain` (the metactl.io/Synced condition does not
// read it: it is written from the sync's result): why each sync ran (its
// triggers), the hook calls it made, the writes it did, how it ended, and
// when the object is tried again.
//
// The event path: the work queue (internal/loop) queues a key with the
// Trigger that caused it and hands a sync the triggers gathered while the
// key waited; the engine (internal/engine) starts a Sync for it in the
// sync's context (With), the hook caller and the writers add to it
// (From(ctx).AddCall; Wrote, which counts the write in
// metactl_object_writes_total as it records it), the engine ends it with
// the outcome, and the Store keeps the last few per object within a fixed
// memory budget (StoreOptions.MaxBytes, estimated by Sync.Size), evicting
// the objects synced longest ago, those whose newest sync succeeded first.
// A process has one Store, shared by its controllers, each under its
// ControllerID (kinds may share names).
package history
