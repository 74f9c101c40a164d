package engine

import (
	"context"
	"log/slog"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Controller is what one kind of controller (pkg/composite, pkg/decorator)
// supplies to the Engine: where its objects are, what each observes, and
// how its hooks are asked and answer. Everything else, from the work queue
// to the status write, is the Engine's.
type Controller interface {
	// Watch acquires the kind's informers on w, with the handlers the
	// Engine makes (ObjectHandler, DependentHandler).
	Watch(w *Watches) error
	// Keys returns the queue key of every object in the cache, for the
	// periodic resync.
	Keys() []Key
	// Resources are the resources whose objects the controller syncs.
	Resources() []*Watched
	// Dependents are the declared resources of the objects' children
	// (attachments).
	Dependents() *children.Declared
	// Observe gathers what the hook is given of t besides the object: its
	// children and claims (composite) or attachments (decorator); the
	// error fails the sync before any hook call. The returned Sync builds
	// the requests and reads the answers of this sync.
	Observe(ctx context.Context, t *Target) (Sync, map[*children.Resource]children.Set, error)
}

// Watched is a resource whose objects a controller syncs (a
// CompositeController's parent resource; each of a DecoratorController's
// resources), as its Controller watches it.
type Watched struct {
	*discovery.Resource
	// Informer is the resource's informer, set by Controller.Watch.
	Informer *informer.Informer
	// Selects reports whether the controller selects an object (nil:
	// every object). An object no longer selected is finalized if it
	// carries the finalizer, else left alone.
	Selects func(obj metav1.Object) bool
	// IgnoreStatusChanges: a status the hook asks for does not call it
	// again (its write's watch event would not either).
	IgnoreStatusChanges bool
	// Noun names an object of the resource in logs ("parent").
	Noun string
	// KeyPrefix begins the text of its objects' keys (Key.String), before
	// namespace/name, so that objects of one namespace and name in two
	// of a kind's resources have texts of their own ("0|" for a
	// DecoratorController's first resource; "" for a composite parent).
	KeyPrefix string
	// RealStatus: the hook is given the object's own .status even when
	// the status it answers is kept in StatusAnnotation (a
	// DecoratorController's objects: metacontroller gives a decorator the
	// object as it is). Without it, such an object's hook is given the
	// annotation's status as .status (statusView).
	RealStatus bool

	// cache, when set, is read instead of Informer (tests' fakes).
	cache objectCache
}

// HookGetsRealStatus reports whether the hook of an object of s is given
// the object's own .status while the status it answers is kept in
// StatusAnnotation (RealStatus, for a built-in resource).
func (s *Watched) HookGetsRealStatus() bool { return s != nil && s.RealStatus && StatusInAnnotation(s) }

// Key is the work queue's key of an object a controller syncs: its
// resource and its namespace ("" for a cluster-scoped object) and name.
// Made by the Controller (its handlers, Keys, KeyOf), it is read back by the
// Engine as it is, never parsed from text.
type Key struct {
	Resource        *Watched
	Namespace, Name string
}

// KeyOf returns the key of obj, an object of res.
func KeyOf(res *Watched, obj metav1.Object) Key {
	return Key{Resource: res, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String is the key as text: its resource's KeyPrefix, then namespace/name
// (name alone for a cluster-scoped object). It keys what outlives a sync
// and is looked up by text: the records of syncs (Engine.History), and
// logs.
func (k Key) String() string {
	prefix := ""
	if k.Resource != nil {
		prefix = k.Resource.KeyPrefix
	}
	if k.Namespace == "" {
		return prefix + k.Name
	}
	return prefix + k.Namespace + "/" + k.Name
}

// LogValue is the key in logs written through slog (--log-format=json):
// its text (String), as klog's text output shows it, instead of the
// struct, whose resource holds a function that JSON cannot encode.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// objectCache is how the Engine reads the objects it syncs;
// *informer.Informer is one.
type objectCache interface {
	Get(namespace, name string) (*unstructured.Unstructured, bool)
}

// Target is one object to sync.
type Target struct {
	// Object is the object from the cache; the Engine replaces it with a
	// copy carrying the metadata of its own writes.
	Object *unstructured.Unstructured
	// Resource is the object's resource.
	Resource *Watched
	// Selected: the controller selects the object (Watched.Selects).
	Selected bool
	// Key is the queue key of the sync, set by the Engine: the echoes of
	// the sync's writes are expected for it (echo.Echoes.Expect).
	Key Key

	// Finalizing and Manage are set by the Engine before Observe:
	// whether the finalize hook is called, and whether the dependents are
	// written (not while the garbage collector holds them).
	Finalizing, Manage bool
	// Observed are the dependents as Controller.Observe found them, before
	// the rounds wrote any; set by the Engine after Observe.
	Observed map[*children.Resource]children.Set

	// queued is the work queue's sync of Key: its triggers, the retry of
	// its failure, its waits on hooks (loop.Sync); for a sync outside the
	// queue (SyncOnce), one of its own, which does nothing of the queue's.
	queued *loop.Sync[Key]
	// calls are the options of the sync's hook calls: the hold of its
	// answers (until the sync ends) and whether it is a retry.
	calls hookclient.CallOptions
	// request counts the bytes of objects the sync's hook requests carry
	// and holds them in the process's budget until the sync ends
	// (CountRequest); nil counts nothing.
	request *requestHold

	// realStatus is the object's own .status (nil: none) when its hook
	// is given it (Watched.HookGetsRealStatus) while Object is its
	// statusView.
	realStatus any
}

// forHook returns obj (Object, or Object as the hook's answers leave it)
// as the hook is given it: with the object's own .status in place of the
// annotation's when Watched.RealStatus applies (a shallow copy), else obj.
func (t *Target) forHook(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if !t.Resource.HookGetsRealStatus() {
		return obj
	}
	return WithStatus(obj, t.realStatus)
}

// WithStatus returns a shallow copy of obj whose .status is status (none
// when nil): obj as the hook is given it when Watched.RealStatus applies,
// status being the object's own.
func WithStatus(obj *unstructured.Unstructured, status any) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	delete(out.Object, "status")
	if status != nil {
		out.Object["status"] = status
	}
	return out
}

// Keyer is a Controller that names the queue key of an object of one of its
// Watched resources, as its handlers would queue it; SyncOnce needs it.
type Keyer interface {
	// KeyOf returns obj's queue key (whose Resource is obj's); false
	// when the controller syncs no object of obj's apiVersion and kind.
	KeyOf(obj *unstructured.Unstructured) (key Key, ok bool)
}

// target returns the object queued as key, from the cache; false when it
// is gone.
func (e *Engine) target(key Key) (*Target, bool) {
	res := key.Resource
	var cache objectCache = res.Informer
	if res.cache != nil {
		cache = res.cache
	}
	obj, ok := cache.Get(key.Namespace, key.Name)
	if !ok {
		return nil, false
	}
	return &Target{Object: obj, Resource: res, Selected: res.Selects == nil || res.Selects(obj)}, true
}

// Sync is one sync of one object, as its Controller reads and writes hook
// requests and answers.
type Sync interface {
	// Request returns the request of a hook call that gives the hook the
	// object as seen, its dependents and related objects, and the
	// response to decode the answer into.
	Request(seen *unstructured.Unstructured, dependents, related hooks.ObjectMap, finalizing bool) (request any, response hooks.Response)
	// Read returns what the Engine reads of a decoded response.
	Read(response hooks.Response) Answer
	// Desired checks the dependents of an answer, whole, and returns them
	// complete (owner reference, namespace, labels), ready to write.
	Desired(response hooks.Response) (map[*children.Resource]children.Set, error)
}

// Stepper is a Sync that makes its rounds' hook calls and writes itself:
// composite's rolling updates call the hook once per revision. A round of
// a Stepper that wrote ends the sync, and its writes are not expected as
// echoes: their watch events start the next sync.
type Stepper interface {
	Sync
	// Step calls the hook (through r) with the object as seen, checks the
	// answers whole, and writes (through r). It returns the answer, nil
	// when nothing was written, and whether it wrote.
	Step(ctx context.Context, r *Round, seen *unstructured.Unstructured) (hooks.Response, bool, error)
}

// Answer is what the Engine reads of a sync (finalize) hook's answer.
type Answer struct {
	// Unknown are the answer's unknown top-level keys.
	Unknown []hooks.UnknownField
	// ListAbsent: the answer has no list of children (attachments).
	ListAbsent bool
	// Status is the status the answer asks for; nil leaves the status.
	Status map[string]any
	// Labels and Annotations to set on the object; a nil value removes
	// the key.
	Labels, Annotations map[string]*string
	// ResyncAfterSeconds > 0 asks for another sync after that delay.
	ResyncAfterSeconds float64
	// Finalized lets the finalizer be removed.
	Finalized bool
	// Events are the Events the answer asks for on the object, checked
	// (hooks.CheckEvents); the rounds record those of the answers they
	// accept (see hookEvents).
	Events []hooks.Event
}
