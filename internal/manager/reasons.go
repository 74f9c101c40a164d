package manager

// The reasons of the Events the manager records on controller objects
// (CompositeController, DecoratorController), and of their Ready
// condition, beyond the API's own (v1alpha1.ReasonRunning,
// v1alpha1.ReasonInvalidSpec, ...).
const (
	// ReasonStarted: a Normal Event once a controller has started, its
	// caches synced (reconcileRunning), naming the generation it runs.
	ReasonStarted = "Started"
	// ReasonStopped: a Normal Event when a controller is stopped to be
	// started again from a new generation or a changed restart annotation
	// of its object (stopChanged); not when the object is deleted.
	ReasonStopped = "Stopped"
	// ReasonStartFailed: the Ready condition's reason, and a Warning
	// Event's, when a controller did not start: its caches did not sync
	// within Options.StartTimeout (reconcileRunning). It is started again
	// after a backoff.
	ReasonStartFailed = "StartFailed"
	// ReasonCleanupFailed: the Ready condition's reason, and a Warning
	// Event's, when removing a deleted controller's finalizer from its
	// parents first fails (tryCleanup; only the Event when the object is
	// gone already); retried until Options.CleanupTimeout has passed.
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonCleanupAbandoned: a Warning Event when the manager gives up
	// the cleanup after Options.CleanupTimeout (tryCleanup), naming each
	// resource whose objects may still carry the finalizer.
	ReasonCleanupAbandoned = "CleanupAbandoned"
)
