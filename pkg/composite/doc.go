// Package composite runs one CompositeController: for every parent object it
// calls the sync hook with the parent and its children, and makes the
// children and the parent's status what the hook returns.
//
// The path of one event, top to bottom:
//
//	informer event (parent or child)  → handlers.go maps it to parent keys
//	work queue (deduplicating, rate limited, one per controller)
//	worker → Controller.sync(key)      → sync.go, in the order the spec gives:
//	   1. read the parent from the cache; skip if gone or not selected
//	   2. claim its children: owned ones from the owner-UID index, orphans
//	      matching its selector adopted after an uncached re-read of the parent
//	   3. call the sync (or finalize) hook
//	   4. validate the response: declared resources, namespaces, selector
//	   5. manage children per update strategy: create, apply, delete
//	   3-5 again, with the children as written and the parent with the
//	      status the answer asked for, until an answer asks for no write
//	      (a fixed point; controller.MaxRounds)
//	   6. write the status when it changed; add or remove the finalizer
//	   7. requeue after resyncAfterSeconds, or with backoff when the hook
//	      did not settle
//
// A failed hook call or an invalid response changes nothing: no child is
// created, updated or deleted, and the status stays as it was. (A later
// call of the same sync that fails leaves what the calls before it asked
// for in force: their children are written, and the last valid answer's
// status.) The parent
// gets a SyncError Event, the log gets a line naming the parent and the
// cause, and the key is retried with exponential backoff (or after the
// hook's Retry-After).
//
// A Controller is safe for concurrent use; Stop waits for in-flight syncs.
package composite
