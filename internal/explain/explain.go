package explain

import (
	"errors"
	"net/url"
	"time"

	"github.com/metactl/metactl/internal/history"
)

// Path is where metactl serves the answer, on its metrics address:
// GET Path?group=G&version=V&resource=R&namespace=NS&name=N (version and
// namespace may be empty; group is empty for the core group).
const Path = "/debug/explain"

// Request names the object to explain.
type Request struct {
	// Group and Resource (plural, lower case) name its resource; Version
	// is informative (any served version of the group matches).
	Group    string `json:"group,omitempty"`
	Version  string `json:"version,omitempty"`
	Resource string `json:"resource"`
	// Namespace is empty for a cluster-scoped object.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Query returns the request as Path's query parameters.
func (r Request) Query() url.Values {
	q := url.Values{}
	q.Set("group", r.Group)
	q.Set("version", r.Version)
	q.Set("resource", r.Resource)
	q.Set("namespace", r.Namespace)
	q.Set("name", r.Name)
	return q
}

// RequestFrom reads a request from Path's query parameters; resource and
// name are required.
func RequestFrom(q url.Values) (Request, error) {
	r := Request{Group: q.Get("group"), Version: q.Get("version"), Resource: q.Get("resource"),
		Namespace: q.Get("namespace"), Name: q.Get("name")}
	if r.Resource == "" || r.Name == "" {
		return r, errors.New("want the query parameters resource and name (and group, namespace as they apply)")
	}
	return r, nil
}

// String names the object as kubectl does: resource.group namespace/name.
func (r Request) String() string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Namespace == "" {
		return res + " " + r.Name
	}
	return res + " " + r.Namespace + "/" + r.Name
}

// Answer is what one metactl process knows of one object.
type Answer struct {
	// Object is the object asked about.
	Object Request `json:"object"`
	// Process is the metactl process that answered.
	Process Process `json:"process"`
	// Watched: a controller of this process syncs the object's resource
	// (whether or not it selects the object).
	Watched bool `json:"watched"`
	// InCache: the object is in the cache of such a controller; false
	// when it does not exist, or not yet (or no longer) as metactl sees it.
	InCache bool `json:"inCache"`
	// Controllers are the controllers that manage the object.
	Controllers []Controller `json:"controllers"`
	// NotSelected are the controllers that sync the object's resource but
	// whose selector does not match it.
	NotSelected []NotSelected `json:"notSelected,omitempty"`
}

// Process is the metactl process that answered.
type Process struct {
	// Name is its host name: the Pod's name in a cluster.
	Name string `json:"name"`
	// Leading: it works on the object: it runs the controllers (it holds
	// the leader Lease, or runs without leader election, or is sharded)
	// and, sharded (--shard-buckets), holds the object's bucket. Any other
	// process answers with no controller and no sync.
	Leading bool `json:"leading"`
}

// Role of an object for its controller.
const (
	RoleParent    = "parent"
	RoleDecorated = "decorated object"
)

// Controller is what one controller knows of the object it manages.
type Controller struct {
	// Kind is CompositeController or DecoratorController; Name the
	// controller object's name.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Role is RoleParent or RoleDecorated.
	Role string `json:"role"`
	// State is where the object stands now.
	State State `json:"state"`
	// Syncs are its last recorded syncs, newest first; none when metactl
	// has not synced it since it started (or the record was evicted).
	Syncs []*history.Sync `json:"syncs"`
	// Dependents are its children (attachments) in the cache, and those
	// its last sync wrote that are gone since.
	Dependents []Dependent `json:"dependents"`
	// Rollout is the rolling update's progress, for a parent with rolling
	// child resources.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Kept says what the record of syncs keeps of each object; absent
	// when unknown.
	Kept *Kept `json:"kept,omitempty"`
}

// Kept is what metactl's record of syncs keeps (history.Store.Limits).
type Kept struct {
	// SyncsPerObject is how many of an object's last syncs are kept, at
	// most, within BytesPerObject bytes; its last failed sync is kept
	// besides.
	SyncsPerObject int   `json:"syncsPerObject"`
	BytesPerObject int64 `json:"bytesPerObject"`
	// Bytes bounds the record of every object of every controller
	// (--history-max-bytes): past it, whole objects are dropped, those
	// whose newest sync succeeded first.
	Bytes int64 `json:"bytes"`
}

// Phases of a State.
const (
	PhaseSynced    = "Synced"
	PhaseFailing   = "Failing"
	PhaseWaiting   = "Waiting"
	PhaseCancelled = "Cancelled"
	// PhaseQueued: no sync is recorded, the object is not failing, and
	// it waits in the work queue for its first sync (a worker is busy:
	// --workers bounds the syncs of a controller at once).
	PhaseQueued = "Queued"
	// PhaseUnknown: no sync is recorded, and the object is not failing
	// or queued.
	PhaseUnknown = "Unknown"
)

// State is where an object stands with its controller.
type State struct {
	// Phase is one of the Phase constants.
	Phase string `json:"phase"`
	// Reason is the reason of the last outcome (HookFailed, ...).
	Reason string `json:"reason,omitempty"`
	// Error is the last sync's error.
	Error string `json:"error,omitempty"`
	// Attempt is how many syncs in a row have failed (or waited).
	Attempt int `json:"attempt,omitempty"`
	// NextAttempt is when it is synced again without a new event; zero
	// when unknown or none is scheduled.
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
	// SyncingSince is when the sync in flight began; zero when none is.
	SyncingSince time.Time `json:"syncingSince,omitzero"`
	// QueuedSince is since when the object waits in the work queue for
	// its next sync to start; zero when it does not.
	QueuedSince time.Time `json:"queuedSince,omitzero"`
}

// NewState derives an object's State from its syncs (newest first), and,
// without any, from what the work queue knows: the error of its failing
// last sync (empty when it is not failing), its failures in a row, and
// since when it waits in the queue (queuedSince, zero when it does not).
func NewState(syncs []*history.Sync, failing string, failures int, syncingSince, queuedSince time.Time) State {
	s := State{SyncingSince: syncingSince, QueuedSince: queuedSince}
	if len(syncs) == 0 {
		if failing == "" {
			s.Phase = PhaseUnknown
			if !queuedSince.IsZero() && syncingSince.IsZero() {
				s.Phase = PhaseQueued
			}
			return s
		}
		s.Phase, s.Error, s.Attempt = PhaseFailing, failing, failures
		return s
	}
	o := syncs[0].Outcome
	s.Reason, s.Error, s.Attempt, s.NextAttempt = o.Reason, o.Error, o.Attempt, o.NextAttempt
	switch o.Result {
	case history.ResultSuccess:
		s.Phase = PhaseSynced
	case history.ResultWaiting:
		s.Phase = PhaseWaiting
	case history.ResultCancelled:
		s.Phase = PhaseCancelled
	default:
		s.Phase = PhaseFailing
	}
	return s
}

// States of a Dependent.
const (
	// DependentPresent: in the cache.
	DependentPresent = "present"
	// DependentDeleting: in the cache, with a deletion timestamp.
	DependentDeleting = "deleting"
	// DependentGone: the last sync wrote it; it is no longer in the cache.
	DependentGone = "gone"
)

// Dependent is one child (attachment).
type Dependent struct {
	// Resource is resource.group ("configmaps", "deployments.apps").
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// State is one of the Dependent constants.
	State string `json:"state"`
	// Revision is the ControllerRevision a rolling child belongs to, and
	// Latest whether that is the parent's latest.
	Revision string `json:"revision,omitempty"`
	Latest   bool   `json:"latest,omitempty"`
}

// Rollout is a rolling update's progress: the parent's Updated condition.
type Rollout struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// NotSelected is a controller that syncs the object's resource but does
// not select the object.
type NotSelected struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Selector is the controller's selector for the resource.
	Selector string `json:"selector"`
}

// ErrNotLeading reports an answer from a standby.
var ErrNotLeading = errors.New("this metactl is not the leader")

// ErrSeveralLeaders reports several metactl Pods that each answer that
// they lead.
var ErrSeveralLeaders = errors.New("several metactl Pods claim to lead")

// describeDuration rounds d for people.
func describeDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
