package children

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// FieldManagerPrefix starts the name of the field manager with which a
// controller applies its children server-side ("metactl/<controller>").
// The cache keeps the managedFields entries of these managers only (see
// pkg/dynamic/informer): DecideServerSide reads them.
const FieldManagerPrefix = informer.OwnManagerPrefix

// ServerSide makes a Writer create and update children with server-side
// apply instead of the three-way merge: no last-applied annotation is
// written, and which fields are the controller's is the API server's
// record (metadata.managedFields) of FieldManager's.
type ServerSide struct {
	// FieldManager names the controller's field manager; it starts with
	// FieldManagerPrefix.
	FieldManager string
	// Force takes the fields another manager owns when they are applied
	// (as metacontroller does); false makes such an apply fail with the
	// conflict.
	Force bool
}

// decide is Decide, with the merge of w's strategy.
func (w *Writer) decide(res *Resource, observed, desired *unstructured.Unstructured) (Action, *unstructured.Unstructured, error) {
	action, merged, err := decide(res.Method, observed, desired, w.merge())
	if (action == Recreate || action == Kept) && w.onlyHandover(observed, merged) {
		// The controller's apply strategy changed, not the child: hand it
		// over in place whatever its update method.
		return Update, merged, nil
	}
	return action, merged, err
}

// onlyHandover reports whether writing merged (w.merge's result) over
// observed changes nothing but how its fields are owned: observed lacks
// the ownership record of how w writes (it was written with the other
// apply strategy; switchOwnership hands it over) and already holds
// merged's content.
func (w *Writer) onlyHandover(observed, merged *unstructured.Unstructured) bool {
	if !w.needsHandover(observed) {
		return false
	}
	if w.ServerSide != nil {
		return apply.Holds(observed, merged)
	}
	return apply.Equal(withoutLastApplied(observed), withoutLastApplied(merged))
}

// withoutLastApplied returns obj's content without the last-applied
// annotation (and without an annotations map left empty).
func withoutLastApplied(obj *unstructured.Unstructured) map[string]any {
	out := obj.DeepCopy()
	annotations := out.GetAnnotations()
	delete(annotations, apply.LastAppliedAnnotation)
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(out.Object, "metadata", "annotations")
	} else {
		out.SetAnnotations(annotations)
	}
	return out.Object
}

// fieldManager is the field manager of w's server-side applies, and the
// one whose Apply entry a client-side w hands over.
func (w *Writer) fieldManager() string {
	if w.ServerSide != nil {
		return w.ServerSide.FieldManager
	}
	return FieldManagerPrefix + w.Controller
}

// needsHandover reports whether observed is owned the other way than w
// writes: applying server-side, it has no Apply entry of w's field
// manager; client-side, it has one.
func (w *Writer) needsHandover(observed *unstructured.Unstructured) bool {
	manager := w.fieldManager()
	hasApply := slices.ContainsFunc(observed.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
	})
	return hasApply != (w.ServerSide != nil)
}

// merge returns how w computes what to write over an observed child and
// whether it changes it: apply.Apply, or applying server-side,
// apply.ServerSide as w's field manager.
func (w *Writer) merge() func(observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	if w.ServerSide == nil {
		return apply.Apply
	}
	manager := w.ServerSide.FieldManager
	return func(observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
		return apply.ServerSide(observed, desired, manager)
	}
}

// Differs reports whether w, writing desired over observed (a child not
// being deleted), would change it: whether it is not up to date, for a
// rolling update.
func (w *Writer) Differs(observed, desired *unstructured.Unstructured) (bool, error) {
	merged, changed, err := w.merge()(observed, desired)
	if err != nil || !changed {
		return changed, err
	}
	return !w.onlyHandover(observed, merged), nil
}

// takenName reports whether res's cache holds an object of want's name
// that parent does not control: a server-side create, which is an apply,
// would take it over (or, when another controller owns it, fail on a
// second controller reference). An object created meanwhile and not in
// the cache yet is not seen.
func takenName(res *Resource, parent, want *unstructured.Unstructured) bool {
	if res.Informer == nil {
		return false
	}
	obj, ok := res.Informer.GetMeta(want.GetNamespace(), want.GetName())
	if !ok {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref == nil || parent == nil || ref.UID != parent.GetUID()
}

// apply creates or updates a child with a server-side apply of config
// (apply.Configuration of the desired object).
func (w *Writer) apply(ctx context.Context, parent *unstructured.Unstructured, res *Resource, key string, config *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	body, err := json.Marshal(config.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", res.Kind, key, err)
	}
	if logger := klog.FromContext(ctx).V(5); logger.Enabled() {
		if b, err := json.Marshal(redact.Value(config.Object)); err == nil {
			logger.Info("Child apply", "kind", res.Kind, "child", key, "fieldManager", w.ServerSide.FieldManager, "patch", string(b))
		}
	}
	warn, warnings := collectWarnings()
	applied, err := w.Objects.Apply(ctx, res.GroupVersionResource(), config.GetNamespace(), config.GetName(), body, w.ServerSide.FieldManager, w.ServerSide.Force, warn)
	w.wrote(ctx, "patch", "child", objectName(res, config), err)
	w.reportWarnings(ctx, parent, res, "apply", config, warnings())
	if apierrors.IsConflict(err) && !w.ServerSide.Force {
		return nil, &ApplyConflictError{Kind: res.Kind, Key: key, FieldManager: w.ServerSide.FieldManager, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", res.Kind, key, err)
	}
	klog.FromContext(ctx).V(4).Info("Applied child", "kind", res.Kind, "child", key)
	return decodeWritten(res, key, applied)
}

// ApplyConflictError is a server-side apply of a child refused because
// other field managers own fields it sets, while conflicts are not forced
// (ServerSide.Force false, --refuse-apply-conflicts). A retry does not
// resolve it: it is a failure of the sync (loop.RefusedConflict), not a
// transient conflict, though it wraps the API server's 409.
type ApplyConflictError struct {
	Kind, Key, FieldManager string
	// Err is the API server's answer, which names the fields and their
	// managers.
	Err error
}

func (e *ApplyConflictError) Error() string {
	return fmt.Sprintf("applying %s %s as %s: other field managers own fields it sets, and conflicts are not forced (--refuse-apply-conflicts); fix: stop the other manager writing those fields, or let metactl take them (without --refuse-apply-conflicts): %v", e.Kind, e.Key, e.FieldManager, e.Err)
}

func (e *ApplyConflictError) Unwrap() error { return e.Err }

// RefusedConflict marks the error as a conflict a retry does not
// resolve (loop.RefusedConflict).
func (e *ApplyConflictError) RefusedConflict() {}

// ClientSideManager is the field manager the API server records for
// metactl's client-side writes: metactl's user agent is
// "metactl/<version>", and the server names the manager of a write that
// does not name one after the user agent's part before the first "/".
const ClientSideManager = "metactl"

// MetacontrollerManager is the field manager of metacontroller's writes:
// its client-side writes' (its user agent's first part) and its
// server-side applies' (its --apply-strategy-ssa-field-manager default). A
// child metactl took over from metacontroller is handed over as one
// metactl wrote.
const MetacontrollerManager = "metacontroller"

// switchOwnership hands the fields of a child written another way over to
// how w writes, before w writes it, so that no field stays owned by the
// field manager of the strategy left (which would keep a field the hook
// stops setting) and none by two. Applying server-side, for a child
// without w's field manager's Apply entry: the fields of the Update
// entries of ClientSideManager and MetacontrollerManager (client-go's
// csaupgrade), and of MetacontrollerManager's Apply entry, go to w's field
// manager's Apply entry. Client-side, for a child with the Apply entry of
// the controller's field manager: its fields go to ClientSideManager's
// Update entry. It reads the child's whole metadata from the server (the
// cache keeps only metactl's field managers' entries) and patches its
// managedFields only, on the precondition of its resourceVersion; the
// child's content is not changed. A child with nothing to hand over costs
// nothing: observed's cached entries tell. It returns the child's new
// resourceVersion when it patched it ("" when not), for the update that
// follows.
func (w *Writer) switchOwnership(ctx context.Context, res *Resource, key string, observed *unstructured.Unstructured) (string, error) {
	if !w.needsHandover(observed) {
		return "", nil // already owned the way w writes
	}
	manager := w.fieldManager()
	meta, err := w.Objects.GetMetadata(ctx, res.GroupVersionResource(), observed.GetNamespace(), observed.GetName())
	if err != nil {
		return "", fmt.Errorf("reading the managed fields of %s %s: %w", res.Kind, key, err)
	}
	if meta.UID != observed.GetUID() {
		return "", nil // replaced meanwhile: the write finds out
	}
	entries, to := meta.ManagedFields, ClientSideManager
	if w.ServerSide != nil {
		to = manager
		obj := &metav1.PartialObjectMetadata{ObjectMeta: *meta.DeepCopy()}
		if err = csaupgrade.UpgradeManagedFields(obj, sets.New(ClientSideManager, MetacontrollerManager), manager); err == nil {
			entries, err = mergeEntry(obj.ManagedFields, MetacontrollerManager, metav1.ManagedFieldsOperationApply, manager, metav1.ManagedFieldsOperationApply)
		}
	} else {
		entries, err = mergeEntry(entries, manager, metav1.ManagedFieldsOperationApply, ClientSideManager, metav1.ManagedFieldsOperationUpdate)
	}
	if err != nil {
		return "", fmt.Errorf("moving the managed fields of %s %s: %w", res.Kind, key, err)
	}
	if equality.Semantic.DeepEqual(entries, meta.ManagedFields) {
		return "", nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": entries},
		// replace, not test: a changed object is a 409 Conflict.
		{"op": "replace", "path": "/metadata/resourceVersion", "value": meta.ResourceVersion},
	})
	if err != nil {
		return "", fmt.Errorf("moving the managed fields of %s %s: %w", res.Kind, key, err)
	}
	patched, err := w.Objects.Patch(ctx, res.GroupVersionResource(), observed.GetNamespace(), observed.GetName(), types.JSONPatchType, patch)
	w.wrote(ctx, "patch", "child", objectName(res, observed), err)
	if err != nil {
		return "", fmt.Errorf("moving the managed fields of %s %s: %w", res.Kind, key, err)
	}
	klog.FromContext(ctx).V(4).Info("Moved the managed fields of a child", "kind", res.Kind, "child", key, "to", to)
	return patched.GetResourceVersion(), nil
}

// mergeEntry returns entries with the fields of the entry of fromManager
// and fromOperation (on the object, not a subresource) given to the entry
// of toManager and toOperation of the same apiVersion, made from it when
// there is none; entries as they are when there is no such entry to give.
// entries is not modified.
func mergeEntry(entries []metav1.ManagedFieldsEntry, fromManager string, fromOperation metav1.ManagedFieldsOperationType, toManager string, toOperation metav1.ManagedFieldsOperationType) ([]metav1.ManagedFieldsEntry, error) {
	from := slices.IndexFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == fromManager && e.Operation == fromOperation && e.Subresource == ""
	})
	if from < 0 {
		return entries, nil
	}
	entries = slices.Clone(entries)
	src := entries[from]
	to := slices.IndexFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == toManager && e.Operation == toOperation && e.Subresource == "" && e.APIVersion == src.APIVersion
	})
	if to < 0 {
		entries[from].Manager, entries[from].Operation = toManager, toOperation
		return entries, nil
	}
	union, err := fieldsUnion(entries[to].FieldsV1, src.FieldsV1)
	if err != nil {
		return nil, err
	}
	entries[to].FieldsV1 = union
	return slices.Delete(entries, from, from+1), nil
}

// fieldsUnion is the union of two managedFields field sets.
func fieldsUnion(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	sa, sb := &fieldpath.Set{}, &fieldpath.Set{}
	if a != nil {
		if err := sa.FromJSON(bytes.NewReader(a.GetRawBytes())); err != nil {
			return nil, err
		}
	}
	if b != nil {
		if err := sb.FromJSON(bytes.NewReader(b.GetRawBytes())); err != nil {
			return nil, err
		}
	}
	raw, err := sa.Union(sb).ToJSON()
	if err != nil {
		return nil, err
	}
	return &metav1.FieldsV1{Raw: raw}, nil
}
