package trigger

import "strconv"

// Trigger is one cause of a sync: why its key was queued.
type Trigger struct {
	// Cause is what happened.
	Cause Cause `json:"cause"`
	// Object names the object whose change it was, as
	// resource/namespace/name (resource/name when cluster-scoped; see
	// ObjectName): the dependent or related object; empty for the synced
	// object itself (CauseObject: the record is its own) and for the
	// causes that are no object's change.
	Object string `json:"object,omitempty"`
	// Generation is the synced object's metadata.generation, for
	// CauseObject.
	Generation int64 `json:"generation,omitempty"`
}

// Cause is the kind of a Trigger; its values are the trigger label of
// metactl_syncs_total.
type Cause string

// The causes of a sync.
const (
	// CauseObject: the synced object (parent, decorated object) changed.
	CauseObject Cause = "object"
	// CauseDependent: one of its children or attachments changed.
	CauseDependent Cause = "dependent"
	// CauseRelated: a related object (customize hook) changed.
	CauseRelated Cause = "related"
	// CauseResync: the resync period (resyncPeriodSeconds, or the informer
	// cache's --cache-resync).
	CauseResync Cause = "resync"
	// CauseResyncAfter: the hook's resyncAfterSeconds.
	CauseResyncAfter Cause = "resync-after"
	// CauseRetry: a retry after a failed or waiting sync.
	CauseRetry Cause = "retry"
	// CauseStart: the controller started (or restarted) and syncs every
	// object once.
	CauseStart Cause = "start"
	// CauseHandover: this replica took the object's bucket (sharding,
	// docs/scaling.md) and syncs every cached object of it once.
	CauseHandover Cause = "handover"
)

// Causes lists every Cause.
var Causes = []Cause{CauseObject, CauseDependent, CauseRelated, CauseResync, CauseResyncAfter, CauseRetry, CauseStart, CauseHandover}

// String names t, in logs and in `metactl explain`: its cause, then the
// object and the generation when it has them ("dependent
// configmaps/ns/c1", "object (generation 3)", "retry").
func (t Trigger) String() string {
	s := string(t.Cause)
	if t.Object != "" {
		s += " " + t.Object
	}
	if t.Generation != 0 {
		s += " (generation " + strconv.FormatInt(t.Generation, 10) + ")"
	}
	return s
}

// ObjectName names an object in a Trigger (and the sync record):
// resource/namespace/name, or resource/name when namespace is empty.
// resource is the group-qualified plural ("configmaps",
// "deployments.apps"), as schema.GroupResource.String gives it.
func ObjectName(resource, namespace, name string) string {
	if namespace != "" {
		return resource + "/" + namespace + "/" + name
	}
	return resource + "/" + name
}
