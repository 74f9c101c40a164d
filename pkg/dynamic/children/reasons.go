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
	// ReasonChildNameTaken: a Warning Event when a desired child cannot be
	// created because an object the parent does not own holds its name:
	// another owner's, one the parent does not adopt, or one being deleted
	// (reportTaken; once per child and holder for a while).
	ReasonChildNameTaken = "ChildNameTaken"
	// ReasonChildTerminating: a Warning Event when a desired child is
	// being deleted and waits for finalizers other than the garbage
	// collector's: it is created again only once they are removed
	// (reportTerminating; once per child).
	ReasonChildTerminating = "ChildTerminating"
)
