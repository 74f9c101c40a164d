package children

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/history"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
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
	return decide(res.Method, observed, desired, w.merge())
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
	_, changed, err := w.merge()(observed, desired)
	return changed, err
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
	writeCtx, warnings := collectWarnings(ctx)
	applied, err := w.Objects.Apply(writeCtx, res.GroupVersionResource(), config.GetNamespace(), config.GetName(), body, w.ServerSide.FieldManager, w.ServerSide.Force)
	history.Wrote(ctx, w.Controller, "patch", "child", objectName(res, config), err)
	w.reportWarnings(ctx, parent, res, "apply", config, warnings())
	if apierrors.IsConflict(err) && !w.ServerSide.Force {
		return nil, fmt.Errorf("applying %s %s as %s: other field managers own fields it sets, and conflicts are not forced (--apply-force-conflicts=false): %w", res.Kind, key, w.ServerSide.FieldManager, err)
	}
	if err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", res.Kind, key, err)
	}
	klog.FromContext(ctx).V(4).Info("Applied child", "kind", res.Kind, "child", key)
	return decodeWritten(res, key, applied)
}

// ClientSideManager is the field manager the API server records for
// metactl's client-side writes: metactl's user agent is
// "metactl/<version>", and the server names the manager of a write that
// does not name one after the user agent's part before the first "/".
const ClientSideManager = "metactl"

// MetacontrollerManager is the field manager the API server records for
// metacontroller's client-side writes (its user agent's first part): a
// child metactl took over from metacontroller is handed over the same way.
const MetacontrollerManager = "metacontroller"

// switchOwnership hands the fields of a child written the other way over to
// how w writes, before w writes it, so that no field stays owned by the
// field manager of the strategy left (which would keep a field the hook
// stops setting) and none by two: applying server-side, the fields of
// ClientSideManager's Update entry go to w's field manager (client-go's
// csaupgrade); client-side, those of the field manager's Apply entry go to
// ClientSideManager's Update entry. It reads the child's whole metadata
// from the server (the cache keeps only metactl's field managers' entries)
// and patches its managedFields only, on the precondition of its
// resourceVersion; the child's content is not changed. A child with
// nothing to hand over costs nothing: observed's cached entries tell. It
// returns the child's new resourceVersion when it patched it ("" when not),
// for the update that follows.
func (w *Writer) switchOwnership(ctx context.Context, res *Resource, key string, observed *unstructured.Unstructured) (string, error) {
	manager := FieldManagerPrefix + w.Controller
	if w.ServerSide != nil {
		manager = w.ServerSide.FieldManager
	}
	hasApply := apply.OwnedFields(observed.GetManagedFields(), manager, observed.GetAPIVersion()) != nil
	if hasApply == (w.ServerSide != nil) {
		return "", nil // already owned the way w writes
	}
	if w.ServerSide != nil && !hasLastApplied(observed) {
		return "", nil // never written client-side
	}
	meta, err := w.Objects.GetMetadata(ctx, res.GroupVersionResource(), observed.GetNamespace(), observed.GetName())
	if err != nil {
		return "", fmt.Errorf("reading the managed fields of %s %s: %w", res.Kind, key, err)
	}
	if meta.UID != observed.GetUID() {
		return "", nil // replaced meanwhile: the write finds out
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: *meta}
	var patch []byte
	if w.ServerSide != nil {
		patch, err = csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(ClientSideManager, MetacontrollerManager), manager)
	} else {
		patch, err = downgradeManagedFieldsPatch(obj, manager, ClientSideManager)
	}
	if err != nil {
		return "", fmt.Errorf("moving the managed fields of %s %s: %w", res.Kind, key, err)
	}
	if patch == nil {
		return "", nil
	}
	patched, err := w.Objects.Patch(ctx, res.GroupVersionResource(), observed.GetNamespace(), observed.GetName(), types.JSONPatchType, patch)
	history.Wrote(ctx, w.Controller, "patch", "child", objectName(res, observed), err)
	if err != nil {
		return "", fmt.Errorf("moving the managed fields of %s %s: %w", res.Kind, key, err)
	}
	to := ClientSideManager
	if w.ServerSide != nil {
		to = manager
	}
	klog.FromContext(ctx).V(4).Info("Moved the managed fields of a child", "kind", res.Kind, "child", key, "to", to)
	return patched.GetResourceVersion(), nil
}

// hasLastApplied reports whether obj has the client-side strategy's
// annotation.
func hasLastApplied(obj *unstructured.Unstructured) bool {
	_, ok := obj.GetAnnotations()[apply.LastAppliedAnnotation]
	return ok
}

// downgradeManagedFieldsPatch is csaupgrade.UpgradeManagedFieldsPatch the
// other way: a JSON patch of obj's managedFields that gives the fields of
// ssaManager's Apply entry to csaManager's Update entry of the same
// apiVersion (made from it when there is none), and the resourceVersion
// precondition; nil when ssaManager has no Apply entry.
func downgradeManagedFieldsPatch(obj *metav1.PartialObjectMetadata, ssaManager, csaManager string) ([]byte, error) {
	entries := slices.Clone(obj.ManagedFields)
	from := slices.IndexFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == ssaManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
	})
	if from < 0 {
		return nil, nil
	}
	src := entries[from]
	to := slices.IndexFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == csaManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" && e.APIVersion == src.APIVersion
	})
	if to < 0 {
		entries[from].Manager, entries[from].Operation = csaManager, metav1.ManagedFieldsOperationUpdate
	} else {
		union, err := fieldsUnion(entries[to].FieldsV1, src.FieldsV1)
		if err != nil {
			return nil, err
		}
		entries[to].FieldsV1 = union
		entries = slices.Delete(entries, from, from+1)
	}
	return json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": entries},
		// replace, not test: a changed object is a 409 Conflict.
		{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.ResourceVersion},
	})
}

// fieldsUnion is the union of two managedFields field sets.
func fieldsUnion(a, b *metav1.FieldsV1) (*metav1.FieldsV1, error) {
	sa, sb := &fieldpath.Set{}, &fieldpath.Set{}
	if a != nil {
		if err := sa.FromJSON(bytes.NewReader(a.Raw)); err != nil {
			return nil, err
		}
	}
	if b != nil {
		if err := sb.FromJSON(bytes.NewReader(b.Raw)); err != nil {
			return nil, err
		}
	}
	raw, err := sa.Union(sb).ToJSON()
	if err != nil {
		return nil, err
	}
	return &metav1.FieldsV1{Raw: raw}, nil
}
