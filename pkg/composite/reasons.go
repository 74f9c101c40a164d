package composite

// Reasons of the parent's Updated condition (ConditionUpdated) under a
// rolling update strategy, as metacontroller writes them (moveOne, the
// last step of rollOut).
const (
	// ReasonOnLatestRevision: every child is on the latest revision
	// (status True).
	ReasonOnLatestRevision = "OnLatestRevision"
	// ReasonRolloutProgressing: a child moves to the latest revision in
	// this sync (status False).
	ReasonRolloutProgressing = "RolloutProgressing"
	// ReasonRolloutWaiting: a child on the latest revision is missing, not
	// updated yet, or fails its status checks (status False).
	ReasonRolloutWaiting = "RolloutWaiting"
)
