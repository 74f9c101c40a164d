package children

// The reasons of the Events a Writer records on the parent.
const (
	// ReasonChildWriteWarning: a Warning Event when the API server returned
	// warnings (an unknown field it dropped, a deprecated API, ...) on a
	// write of a child (reportWarnings; the same warning for the same
	// child at most once in reportTTL).
	ReasonChildWriteWarning = "ChildWriteWarning"
	// ReasonChildNotUpdated: a Normal Event when a child differs from what
	// the hook asks and its update strategy (OnDelete) keeps it as it is
	// (reportKept; once for each change asked of the child).
	ReasonChildNotUpdated = "ChildNotUpdated"
)
