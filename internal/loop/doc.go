// Package loop runs a controller's reconcile loop: a deduplicating,
// rate-limited work queue of object keys, of a type of the controller's
// own, each synced by a call of a sync function given the key's Sync, at
// most Options.Workers at once, on worker goroutines started when there is
// work and ended when idle, in the processNextWorkItem idiom of client-go's
// sample-controller. Of those syncs, at most Options.Active
// run at once outside Sync.WhileWaiting, the mark of a wait on a hook: a
// slow hook is waited on by many syncs at once, while syncs that decode and
// write stay few (a sync resuming from a wait goes before a new one). The
// syncs in flight are bounded by a window between Active and Workers that
// opens while syncs wait longer on their hooks than for a turn when they
// come back, and closes otherwise, so a fast hook with a busy API server
// does not pile up syncs in memory.
//
// The turns to run may be shared between loops (Options.Share, a Share):
// then at most the Share's turns run at once across them, and a freed turn
// goes to a waiting sync of the loop holding the fewest, between equals to
// the one served least recently, so that one controller's hot queue
// cannot take the turns a controller with few keys needs.
//
// Every key is queued with its trigger.Trigger (AddFor, AddAfterFor): the loop
// gathers the triggers of a key while it waits (distinct ones, at most
// MaxTriggers, the rest counted) and hands them to its sync (Sync.Triggers);
// a trigger queued with a delay counts only once due. Its own retries are
// trigger.CauseRetry, a sync's requeueAfter trigger.CauseResyncAfter. A sync that finds
// its object gone (Sync.Gone) drops the retries and resyncs scheduled for it;
// one that returns ErrSkipped (its key is not this process's now) drops
// them too, and is neither retried nor counted.
// metactl_syncs_total counts each sync under its first trigger's cause.
//
// Guarantees: a key is never synced twice at once; a key added
// while it is being synced is synced again afterwards, once however many
// times it was added; a key whose sync fails is retried with the rate
// limiter's backoff (capped at Options.MaxRetryDelay), or after the delay
// its error asks for (a DelayedRetry: a hook's 429 Retry-After), and the log line of the failure says
// after how long and which attempt in a row failed; a success resets the
// backoff. Sync.RetryDelay tells a failing sync, before it returns, when it will
// be retried (for its Event). Conflicts (the object changed under the sync)
// are retried quietly. Stop stops taking work, cancels the context of the
// in-flight syncs and waits for them at most Options.StopGracePeriod
// (then logs and abandons those still running); keys still queued are
// dropped.
package loop
