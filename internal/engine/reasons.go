package engine

// The reasons of the Events the engine records: on the objects it syncs,
// and on the controller object (ReasonDuplicateResource). The Events a
// hook asks for keep the hook's reasons.
const (
	// ReasonSyncError: a sync failed (recordSyncError, a Warning Event naming
	// the controller and saying when the object is retried); not for a
	// conflict, which the retry resolves, nor for a cancelled sync.
	ReasonSyncError = "SyncError"
	// ReasonHookNotSettled: the sync hook still asked for changes after
	// MaxRounds calls in one sync (Unsettled, a Warning Event once until
	// the object settles again).
	ReasonHookNotSettled = "HookNotSettled"
	// ReasonUnknownAnswerField: a hook answered with top-level keys
	// metactl does not know, which it ignores (Answers.ReportUnknown, a
	// Warning Event on the object; the recorder aggregates repeats).
	ReasonUnknownAnswerField = "UnknownAnswerField"
	// ReasonStatusPruned: the status schema of a custom resource dropped
	// fields of the status the hook answered (warnPruned, a Warning Event
	// once per resource).
	ReasonStatusPruned = "StatusPruned"
	// ReasonDuplicateResource: the controller object lists a resource
	// twice (ReportRepeated, a Warning Event on the controller object).
	ReasonDuplicateResource = "DuplicateResource"
)

// The reasons of the SyncedConditionType condition (see syncReason).
const (
	// ReasonSynced: the last sync succeeded (status True).
	ReasonSynced = "Synced"
	// ReasonHookFailed: a hook call failed: the hook could not be reached
	// or did not answer in time, answered other than 200, or with a body
	// that is not a valid answer, or its credentials could not be used.
	ReasonHookFailed = "HookFailed"
	// ReasonHookBudgetFull: a hook answered, but its answer found no room
	// within the hook's timeout in metactl's memory budget of hook
	// answers (a *hookclient.BudgetError); the message names the flag to
	// raise. Not the hook's failure: other calls held the room.
	ReasonHookBudgetFull = "HookBudgetFull"
	// ReasonInvalidAnswer: metactl's checks refused the hook's answer (an
	// invalid child, an invalid event, an answer without its list of
	// children, ...).
	ReasonInvalidAnswer = "InvalidAnswer"
	// ReasonWriteFailed: a write to the API server failed.
	ReasonWriteFailed = "WriteFailed"
	// ReasonWaiting: the sync waits (loop.ErrWaiting): the hook did not
	// settle, or something it needs is not there yet.
	ReasonWaiting = "Waiting"
	// ReasonRequestTooLarge: the hook request would carry more bytes of
	// objects than one sync may send (*RequestTooLargeError); the sync
	// hook was not called.
	ReasonRequestTooLarge = "RequestTooLarge"
	// ReasonRequestBudget: no room in the process's budget of request
	// bytes came in time (*RequestBudgetError); the sync hook was not
	// called.
	ReasonRequestBudget = "RequestBudget"
	// ReasonSyncFailed: any other failure (related objects, ...).
	ReasonSyncFailed = "SyncFailed"
)
