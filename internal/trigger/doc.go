// Package trigger says why a sync runs: a Trigger is one cause of a key's
// sync (its Cause, and the object whose change it was), as the work queue
// (internal/loop) gathers them for a key, the record of syncs (internal/history)
// and `metactl explain` show them, and the metrics count them. ObjectName
// is how a Trigger and the record name an object.
//
// It is a leaf: the work queue, the record, the echoes of a controller's
// own writes (pkg/dynamic/echo) and the event handlers share it without
// importing one another. The package imports nothing of metactl.
package trigger
