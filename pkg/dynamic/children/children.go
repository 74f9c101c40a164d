package children

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// Resource is one declared child resource, resolved through discovery,
// with its update method and the informer watching it.
type Resource struct {
	*discovery.Resource
	Method v1alpha1.ChildUpdateMethod
	// StatusChecks are the checks a rolling update waits for (nil: none).
	StatusChecks *v1alpha1.ChildUpdateStatusChecks
	Informer     *informer.Informer
}

// Set holds the children of one resource by Key.
type Set map[string]*unstructured.Unstructured

// Key names an object within its resource as client-go's cache keys it:
// namespace/name, or name for a cluster-scoped object.
func Key(obj metav1.Object) string { return cache.MetaObjectToName(obj).String() }

// Objects is what a Writer writes children through:
// *objectclient.Client, whose methods these are and whose doc says what
// each does (errors from the server are *errors.StatusError); or, in tests
// without an API server, internal/inmemory's store.
type Objects interface {
	Create(ctx context.Context, gvr schema.GroupVersionResource, namespace string, body []byte, opts ...objectclient.WriteOption) (*informer.Object, error)
	Update(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, body []byte, opts ...objectclient.WriteOption) (*informer.Object, error)
	Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (*informer.Object, error)
	Delete(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, opts metav1.DeleteOptions, wopts ...objectclient.WriteOption) (*informer.Object, error)
	Apply(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, body []byte, fieldManager string, force bool, opts ...objectclient.WriteOption) (*informer.Object, error)
	GetMetadata(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.ObjectMeta, error)
}

var _ Objects = (*objectclient.Client)(nil)

// Writer writes children for one controller.
type Writer struct {
	// Objects creates, updates and deletes children; *objectclient.Client's
	// answers cost a parse of their metadata where client-go's dynamic
	// client decodes them whole.
	Objects Objects
	// Controller names the controller in logs and in the field manager of
	// server-side applies.
	Controller string
	// OnWrite, when set, is told of each write after its request: its verb,
	// target ("child"), the object written (trigger.ObjectName) and its
	// error (the engine counts and records it: history.WritesOf).
	OnWrite func(ctx context.Context, verb, target, object string, err error)
	// Concurrency bounds the writes in flight for one Manage call; default 8.
	Concurrency int
	// Recorder, when set, records on the parent the Events of what its
	// user should know: the API server's warnings on a write of a child
	// (ReasonChildWriteWarning), and a child that differs from what the
	// hook asks but that its update strategy keeps (ReasonChildNotUpdated).
	// Each is reported once for a while, not at every sync.
	Recorder record.EventRecorder
	// Noun is what Events and logs call the objects written: "child"
	// (the default) or "attachment".
	Noun string
	// ServerSide, when set, creates and updates children with server-side
	// apply; nil (the default) with the three-way merge of
	// pkg/dynamic/apply and its last-applied annotation.
	ServerSide *ServerSide

	reportedOnce sync.Once
	reported     *reported
}

// wrote tells w.OnWrite of a write, if set.
func (w *Writer) wrote(ctx context.Context, verb, target, object string, err error) {
	if w.OnWrite != nil {
		w.OnWrite(ctx, verb, target, object, err)
	}
}

// Result is what Manage did.
type Result struct {
	// Observed is the observed children updated by the writes: created
	// and updated objects as the server returned them; deleted ones
	// removed, or, while the server still keeps them (finalizers,
	// graceful deletion), as its answer to the delete returned them.
	Observed map[*Resource]Set
	// Written are the objects created or changed by an update, as the
	// server returned them (for echo expectations). An update the server
	// answered with the object's resourceVersion unchanged changed
	// nothing, causes no watch event, and is not in Written, so that it
	// does not call the hook again (see controller.MaxRounds).
	Written []*unstructured.Unstructured
	// Deleted is the number of deletes issued.
	Deleted int
	// Blocked are the desired children that could not be created because
	// an object the parent does not own holds their name (reported on the
	// parent: ReasonChildNameTaken). The parent waits for that object to
	// go: the caller re-syncs it when it does.
	Blocked []Blocked
}

// Blocked is a desired child whose name another object holds.
type Blocked struct {
	Resource        *Resource
	Namespace, Name string
}

// Wrote reports whether Manage wrote anything.
func (r *Result) Wrote() bool { return len(r.Written) > 0 || r.Deleted > 0 }

// Manage makes the observed children of each resource the desired ones:
// delete what is not desired, create what is missing, update the rest per
// the resource's method (OnDelete: never; Recreate and RollingRecreate:
// delete, to be created again by a later call once it is gone; InPlace and
// RollingInPlace: apply), as Decide (or, applying server-side, the same
// rule with apply.ServerSide) says of each child. Desired objects must be
// complete (namespace, owner references); Manage records last-applied
// state itself (client-side), and hands a child's fields over from the
// other strategy's field manager before its first write (switchOwnership).
// It does not modify observed or desired.
// What the parent's user should know (see Writer.Recorder) is reported on
// parent.
func (w *Writer) Manage(ctx context.Context, parent *unstructured.Unstructured, resources []*Resource, observed, desired map[*Resource]Set) (*Result, error) {
	ws := newWrites(w.concurrency(), resources, observed)
	for _, res := range resources {
		w.deleteUndesired(ctx, ws, parent, res, observed[res], desired[res])
		w.writeDesired(ctx, ws, parent, res, observed[res], desired[res])
	}
	return ws.wait()
}

// concurrency is the most writes in flight for one Manage call.
func (w *Writer) concurrency() int {
	if w.Concurrency <= 0 {
		return 8
	}
	return w.Concurrency
}

// deleteUndesired deletes each child of res in observed that desired
// lacks and that decide says to delete, in ws.
func (w *Writer) deleteUndesired(ctx context.Context, ws *writes, parent *unstructured.Unstructured, res *Resource, observed, desired Set) {
	for key, obj := range observed {
		if _, ok := desired[key]; ok {
			continue // decided by writeDesired
		}
		if action, _, _ := w.decide(res, obj, nil); action != Delete {
			continue
		}
		w.deleteChild(ctx, ws, parent, res, key, obj)
	}
}

// deleteChild deletes obj, the child key of res, in ws.
func (w *Writer) deleteChild(ctx context.Context, ws *writes, parent *unstructured.Unstructured, res *Resource, key string, obj *unstructured.Unstructured) {
	ws.run(func() error {
		left, err := w.delete(ctx, parent, res, obj)
		if err != nil {
			return err
		}
		ws.deleted(res, key, left)
		return nil
	})
}

// writeDesired makes each child of res in observed what desired says, in
// ws, as decide says: created, updated, deleted to be created again, or
// kept (and its user told).
func (w *Writer) writeDesired(ctx context.Context, ws *writes, parent *unstructured.Unstructured, res *Resource, observed, desired Set) {
	for key, want := range desired {
		have := observed[key]
		action, merged, err := w.decide(res, have, want)
		if err != nil {
			ws.fail(fmt.Errorf("merging %s %s: %w", res.Kind, key, err))
			continue
		}
		if action == None && have != nil && have.GetDeletionTimestamp() != nil {
			w.reportTerminating(ctx, parent, res, have)
		}
		switch action {
		case Create:
			ws.run(func() error {
				created, err := w.create(ctx, parent, res, key, want)
				if err != nil {
					return err
				}
				if created == nil && w.reportTaken(ctx, parent, res, want) {
					ws.blocked(res, want)
				}
				if created == nil {
					return nil
				}
				ws.written(res, key, created)
				return nil
			})
		case Kept:
			// Never updated; the parent's user is told once when the
			// hook asks for a change.
			w.reportKept(ctx, parent, res, key, have, want)
		case Recreate:
			w.deleteChild(ctx, ws, parent, res, key, have)
		case Update:
			ws.run(func() error {
				updated, err := w.updateChild(ctx, parent, res, key, have, merged)
				if apierrors.IsNotFound(err) {
					// Deleted since it was observed, as metacontroller
					// takes it (no error): the next call sees it gone, and
					// its deletion's watch event syncs the parent anyway.
					klog.FromContext(ctx).V(4).Info("Child gone before its update", "kind", res.Kind, "child", key)
					ws.gone(res, key)
					return nil
				}
				if err != nil {
					return err
				}
				ws.written(res, key, updated)
				return nil
			})
		}
	}
}

// updateChild writes merged, what decide made of have and the desired
// child key, server-side or as an update, once the child's fields are
// handed over from the other strategy's field manager (switchOwnership).
func (w *Writer) updateChild(ctx context.Context, parent *unstructured.Unstructured, res *Resource, key string, have, merged *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	rv, err := w.switchOwnership(ctx, res, key, have)
	if err != nil {
		return nil, err
	}
	if w.ServerSide != nil {
		return w.apply(ctx, parent, res, key, merged)
	}
	if rv != "" {
		merged.SetResourceVersion(rv) // only managedFields changed since have
	}
	logDiff(ctx, res, key, have, merged)
	return w.update(ctx, parent, res, key, merged)
}

// writes runs the writes of one Manage call, at most a limit at once,
// and gathers what they did and their errors.
type writes struct {
	wg  sync.WaitGroup
	sem chan struct{}
	// mu guards result and errs.
	mu     sync.Mutex
	result *Result
	errs   []error
}

// newWrites returns the writes of a Manage call of at most limit writes
// at once, whose Result starts from a copy of observed.
func newWrites(limit int, resources []*Resource, observed map[*Resource]Set) *writes {
	result := &Result{Observed: make(map[*Resource]Set, len(resources))}
	for _, res := range resources {
		set := make(Set, len(observed[res]))
		for k, v := range observed[res] {
			set[k] = v
		}
		result.Observed[res] = set
	}
	return &writes{sem: make(chan struct{}, limit), result: result}
}

// run runs the write f in the background, once fewer than the limit run.
func (ws *writes) run(f func() error) {
	ws.wg.Add(1)
	ws.sem <- struct{}{}
	runners.run(func() {
		defer ws.wg.Done()
		defer func() { <-ws.sem }()
		if err := f(); err != nil {
			ws.fail(err)
		}
	})
}

// fail records an error of the Manage call.
func (ws *writes) fail(err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.errs = append(ws.errs, err)
}

// deleted records a delete; left is the child still there, being
// deleted (nil: gone). Its watch events are not expected: they sync
// the parent again, as the child's deletion goes on.
func (ws *writes) deleted(res *Resource, key string, left *unstructured.Unstructured) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.result.Deleted++
	if left == nil {
		delete(ws.result.Observed[res], key)
		return
	}
	ws.result.Observed[res][key] = left
}

// blocked records want, a child of res whose name another object holds.
func (ws *writes) blocked(res *Resource, want *unstructured.Unstructured) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.result.Blocked = append(ws.result.Blocked, Blocked{Resource: res, Namespace: want.GetNamespace(), Name: want.GetName()})
}

// gone records that the child key of res was found deleted by someone
// else: it is no longer observed, and nothing was written.
func (ws *writes) gone(res *Resource, key string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.result.Observed[res], key)
}

// written records obj, a child created or updated, as the server
// returned it.
func (ws *writes) written(res *Resource, key string, obj *unstructured.Unstructured) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	before := ws.result.Observed[res][key]
	ws.result.Observed[res][key] = obj
	if before != nil && before.GetResourceVersion() == obj.GetResourceVersion() {
		// The server kept the object as it was (it dropped what the
		// update would change, such as an unknown field): no change,
		// and no watch event to expect.
		return
	}
	ws.result.Written = append(ws.result.Written, obj)
}

// wait waits for the writes and returns what they did and their errors.
func (ws *writes) wait() (*Result, error) {
	ws.wg.Wait()
	return ws.result, errors.Join(ws.errs...)
}

func (w *Writer) create(ctx context.Context, parent *unstructured.Unstructured, res *Resource, key string, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := CheckName(res, want.GetName()); err != nil {
		// The API server would refuse it: not sent, and said plainly.
		return nil, fmt.Errorf("creating %s %s: %w", res.Kind, key, err)
	}
	if w.ServerSide != nil {
		if takenName(res, parent, want) {
			// An apply would write it: left alone, as a create that
			// finds the name taken is.
			klog.FromContext(ctx).V(4).Info("Child already exists", "kind", res.Kind, "child", key)
			return nil, nil
		}
		config, err := apply.Configuration(want)
		if err != nil {
			return nil, fmt.Errorf("creating %s %s: %w", res.Kind, key, err)
		}
		return w.apply(ctx, parent, res, key, config)
	}
	obj := want.DeepCopy()
	if err := apply.SetLastApplied(obj, want.Object); err != nil {
		return nil, fmt.Errorf("creating %s %s: %w", res.Kind, key, err)
	}
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", res.Kind, key, err)
	}
	warn, warnings := collectWarnings()
	created, err := w.Objects.Create(ctx, res.GroupVersionResource(), obj.GetNamespace(), body, warn)
	w.wrote(ctx, "create", "child", objectName(res, obj), err)
	w.reportWarnings(ctx, parent, res, "create", obj, warnings())
	if apierrors.IsAlreadyExists(err) {
		// Another owner's, or ours not yet in the cache: not an error.
		klog.FromContext(ctx).V(4).Info("Child already exists", "kind", res.Kind, "child", key)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s %s: %w", res.Kind, key, err)
	}
	klog.FromContext(ctx).V(4).Info("Created child", "kind", res.Kind, "child", key)
	return decodeWritten(res, key, created)
}

func (w *Writer) update(ctx context.Context, parent *unstructured.Unstructured, res *Resource, key string, merged *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	// The cache keeps only metactl's own managedFields entries (see
	// FieldManagerPrefix): sent back, they would replace the others'.
	unstructured.RemoveNestedField(merged.Object, "metadata", "managedFields")
	body, err := json.Marshal(merged.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", res.Kind, key, err)
	}
	warn, warnings := collectWarnings()
	updated, err := w.Objects.Update(ctx, res.GroupVersionResource(), merged.GetNamespace(), merged.GetName(), body, warn)
	w.wrote(ctx, "update", "child", objectName(res, merged), err)
	w.reportWarnings(ctx, parent, res, "update", merged, warnings())
	if err != nil {
		return nil, fmt.Errorf("updating %s %s: %w", res.Kind, key, err)
	}
	klog.FromContext(ctx).V(4).Info("Updated child", "kind", res.Kind, "child", key)
	return decodeWritten(res, key, updated)
}

// decodeWritten decodes a child as a write returned it, as the cache would
// hold it (without managedFields).
func decodeWritten(res *Resource, key string, obj *informer.Object) (*unstructured.Unstructured, error) {
	u, err := obj.Unstructured()
	if err != nil {
		return nil, fmt.Errorf("decoding %s %s as written: %w", res.Kind, key, err)
	}
	return u, nil
}

// delete deletes a child in the background, on the precondition that it is
// still the object that was observed. A child already gone, or replaced by
// another object of that name, counts as deleted. It returns the child
// when it is still there, being deleted (it has finalizers, or is deleted
// gracefully): the next call sees it as metacontroller's next sync would,
// with its deletionTimestamp; nil when it is gone.
func (w *Writer) delete(ctx context.Context, parent *unstructured.Unstructured, res *Resource, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	warn, warnings := collectWarnings()
	left, err := w.Objects.Delete(ctx, res.GroupVersionResource(), obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(obj.GetUID())},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	}, warn)
	w.wrote(ctx, "delete", "child", objectName(res, obj), err)
	w.reportWarnings(ctx, parent, res, "delete", obj, warnings())
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return nil, fmt.Errorf("deleting %s %s: %w", res.Kind, Key(obj), err)
	}
	if left == nil {
		klog.FromContext(ctx).V(4).Info("Deleted child", "kind", res.Kind, "child", Key(obj))
		return nil, nil
	}
	klog.FromContext(ctx).V(4).Info("Deleting child; it is still there", "kind", res.Kind, "child", Key(obj), "finalizers", left.Finalizers)
	return decodeWritten(res, Key(obj), left)
}

// logDiff logs, at verbosity 5, the merge patch that an update applies;
// Secret data is redacted. The patch is made with json-patch.v4, which
// client-go's csaupgrade links in and internal/plan applies patches with.
func logDiff(ctx context.Context, res *Resource, key string, have, merged *unstructured.Unstructured) {
	logger := klog.FromContext(ctx).V(5)
	if !logger.Enabled() {
		return
	}
	before, err1 := json.Marshal(redact.Value(have.Object))
	after, err2 := json.Marshal(redact.Value(merged.Object))
	if err1 != nil || err2 != nil {
		return
	}
	patch, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return
	}
	logger.Info("Child diff", "kind", res.Kind, "child", key, "patch", string(patch))
}

// objectName names a child of res in the sync's record.
func objectName(res *Resource, obj metav1.Object) string {
	return trigger.ObjectName(res.GroupVersionResource().GroupResource().String(), obj.GetNamespace(), obj.GetName())
}
