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

// Writer writes children for one controller.
type Writer struct {
	// Objects creates, updates and deletes children; its answers cost a
	// parse of their metadata where client-go's dynamic client decodes
	// them whole.
	Objects *objectclient.Client
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
	limit := w.Concurrency
	if limit <= 0 {
		limit = 8
	}
	result := &Result{Observed: make(map[*Resource]Set, len(resources))}
	for _, res := range resources {
		set := make(Set, len(observed[res]))
		for k, v := range observed[res] {
			set[k] = v
		}
		result.Observed[res] = set
	}

	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, limit)
	)
	run := func(f func() error) {
		wg.Add(1)
		sem <- struct{}{}
		runners.run(func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	// deleted records a delete; left is the child still there, being
	// deleted (nil: gone). Its watch events are not expected: they sync
	// the parent again, as the child's deletion goes on.
	deleted := func(res *Resource, key string, left *unstructured.Unstructured) {
		mu.Lock()
		defer mu.Unlock()
		result.Deleted++
		if left == nil {
			delete(result.Observed[res], key)
			return
		}
		result.Observed[res][key] = left
	}
	written := func(res *Resource, key string, obj *unstructured.Unstructured) {
		mu.Lock()
		defer mu.Unlock()
		before := result.Observed[res][key]
		result.Observed[res][key] = obj
		if before != nil && before.GetResourceVersion() == obj.GetResourceVersion() {
			// The server kept the object as it was (it dropped what the
			// update would change, such as an unknown field): no change,
			// and no watch event to expect.
			return
		}
		result.Written = append(result.Written, obj)
	}

	for _, res := range resources {
		for key, obj := range observed[res] {
			if _, ok := desired[res][key]; ok {
				continue // decided below
			}
			if action, _, _ := w.decide(res, obj, nil); action != Delete {
				continue
			}
			run(func() error {
				left, err := w.delete(ctx, parent, res, obj)
				if err != nil {
					return err
				}
				deleted(res, key, left)
				return nil
			})
		}
		for key, want := range desired[res] {
			have := observed[res][key]
			action, merged, err := w.decide(res, have, want)
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("merging %s %s: %w", res.Kind, key, err))
				mu.Unlock()
				continue
			}
			switch action {
			case Create:
				run(func() error {
					created, err := w.create(ctx, parent, res, key, want)
					if err != nil || created == nil {
						return err
					}
					written(res, key, created)
					return nil
				})
			case Kept:
				// Never updated; the parent's user is told once when the
				// hook asks for a change.
				w.reportKept(ctx, parent, res, key, have, want)
			case Recreate:
				run(func() error {
					left, err := w.delete(ctx, parent, res, have)
					if err != nil {
						return err
					}
					deleted(res, key, left)
					return nil
				})
			case Update:
				run(func() error {
					rv, err := w.switchOwnership(ctx, res, key, have)
					if err != nil {
						return err
					}
					var updated *unstructured.Unstructured
					if w.ServerSide != nil {
						updated, err = w.apply(ctx, parent, res, key, merged)
					} else {
						if rv != "" {
							merged.SetResourceVersion(rv) // only managedFields changed since have
						}
						logDiff(ctx, res, key, have, merged)
						updated, err = w.update(ctx, parent, res, key, merged)
					}
					if err != nil {
						return err
					}
					written(res, key, updated)
					return nil
				})
			}
		}
	}
	wg.Wait()
	return result, errors.Join(errs...)
}

func (w *Writer) create(ctx context.Context, parent *unstructured.Unstructured, res *Resource, key string, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
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
	writeCtx, warnings := collectWarnings(ctx)
	created, err := w.Objects.Create(writeCtx, res.GroupVersionResource(), obj.GetNamespace(), body)
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
	writeCtx, warnings := collectWarnings(ctx)
	updated, err := w.Objects.Update(writeCtx, res.GroupVersionResource(), merged.GetNamespace(), merged.GetName(), body)
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
	writeCtx, warnings := collectWarnings(ctx)
	left, err := w.Objects.Delete(writeCtx, res.GroupVersionResource(), obj.GetNamespace(), obj.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(obj.GetUID())},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
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
