package children

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/history"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
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
