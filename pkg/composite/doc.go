// Package composite runs one CompositeController: for every parent object
// the sync hook is called with the parent and its children, and the
// children and the parent's status become what the hook returns.
//
// The engine, engine.Engine, runs it: queue and workers, the finalizer
// decision, the hook rounds until a fixed point, the status write and
// failure reporting are its (see internal/engine for the path of one
// event). Controller is the engine's engine.Controller and supplies what is
// a CompositeController's own:
//
//	controller.go  New: the spec checked and resolved, the parent resource
//	               (engine.Watched) with its label selector; Watch:
//	               informers of parents, children and ControllerRevisions;
//	               a queue key (engine.Key, parentKey) is the parent
//	               resource and the parent's namespace and name
//	handlers.go    a child's event → its owner's key (ownerKeys), or, for
//	               an orphan, the parents whose selector matches it
//	               (enqueueCandidates)
//	selectors.go   each parent's child selector cached per generation, for
//	               orphans' events
//	parent.go      a parent's child selector (childSelector), and the
//	               finalizer's name
//	sync.go        Observe: the parent's child selector and children; the sync
//	               request, and the answer read (status with
//	               observedGeneration); canAdopt, the uncached re-read of
//	               the parent before an adoption
//	claim.go       the children: owned ones, and matching orphans adopted
//	               (claimChildren), all counted for the hook request before
//	               any is decoded or adopted (engine.Target.CountRequest);
//	               an answer's children checked (declared
//	               resources, namespaces, selector labels) and completed
//	               (desiredChildren)
//	rolling.go     rolling child resources: one hook call per revision,
//	               ControllerRevisions written before any child, one child
//	               moved to the latest revision per sync
//
// A failed hook call or an invalid response changes nothing: no child is
// created, updated or deleted, and the status stays as it was (adoptions
// and releases, made before the hook is called, stand). (A later
// call of the same sync that fails leaves what the calls before it asked
// for in force: their children are written, and the last valid answer's
// status.) The parent gets a SyncError Event, the log gets a line naming
// the parent and the cause, and the key is retried with exponential
// backoff (or after the hook's Retry-After).
//
// A Controller is safe for concurrent use; Stop cancels in-flight syncs and
// waits for them at most the stop grace period.
package composite
