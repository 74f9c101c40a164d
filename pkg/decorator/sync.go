package decorator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/metactl/metactl/pkg/controller"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// sync decorates the object named by key as the hook wants; see the package
// doc for the steps.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	index, namespace, name, err := splitKey(key)
	if err != nil || index >= len(c.watched) {
		return 0, nil // not a key we made
	}
	w := c.watched[index]
	c.echoes.Begin(key)
	defer func() {
		if c.echoes.End(key) {
			c.loop.Add(key)
		}
	}()
	// 1. The object, from the cache.
	obj, ok := w.informer.Get(namespace, name)
	if !ok {
		if c.related != nil {
			c.related.Forget(key)
		}
		c.unsettled.Settled(key)
		return 0, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("object", klog.KObj(obj), "kind", w.Kind))
	client := c.opts.Client.Resource(w.GroupVersionResource()).Namespace(obj.GetNamespace())

	selected := w.selects(obj)
	deleting := obj.GetDeletionTimestamp() != nil
	hasFinalizer := c.finalizer != "" && finalizer.Has(obj, c.finalizer)
	finalizing := false
	switch {
	case deleting || !selected:
		if !hasFinalizer {
			c.unsettled.Settled(key)
			return 0, c.removeStaleFinalizer(ctx, client, obj)
		}
		finalizing = true
	case c.finalizer != "" && !hasFinalizer:
		if obj, err = c.setFinalizer(ctx, client, obj, c.finalizer, finalizer.Add); err != nil {
			return 0, err
		}
	default:
		if err := c.removeStaleFinalizer(ctx, client, obj); err != nil {
			return 0, err
		}
	}

	// 2. Its attachments: ours, by owner UID and annotation.
	observed := c.observedAttachments(obj)

	// Related objects, when a customize hook declares them.
	relatedObjects := hooks.ObjectMap{}
	if c.related != nil {
		if relatedObjects, err = c.related.Related(ctx, key, obj, w.Namespaced); err != nil {
			return 0, c.syncFailed(ctx, obj, fmt.Errorf("related objects: %w", err))
		}
	}

	// 3-4. The hook, its attachments checked, then written; and again, with
	// the attachments as written and the object with the labels,
	// annotations and status the answer asked for, until an answer asks for
	// no write (see controller.MaxRounds).
	hook, hookName := c.dc.Spec.Hooks.Sync, "sync"
	if finalizing {
		hook, hookName = c.dc.Spec.Hooks.Finalize, "finalize"
	}
	manage := !finalizer.HeldByGarbageCollector(obj)
	ref := ownership.ControllerRef(obj, w.GroupVersionKind())
	// response is the last valid answer: a later call that fails or
	// answers invalidly leaves the answers before it in force (its error is
	// reported, and the object retried). seen is the object as the hook is
	// given it.
	var (
		response *hooks.DecoratorSyncResponse
		settled  bool
		errs     []error
		seen     = obj
		// wantStatus is the status the last answer that gave one asked
		// for; nil while every answer left it (null).
		wantStatus map[string]any
	)
	for round := 1; round <= controller.MaxRounds && !settled; round++ {
		answer := &hooks.DecoratorSyncResponse{}
		request := &hooks.DecoratorSyncRequest{
			Controller:  c.object,
			Object:      seen,
			Attachments: hooks.ObjectMapOf(*hook.Version, w.Namespaced, c.attachments.Resources, observed),
			Related:     relatedObjects,
			Finalizing:  finalizing,
		}
		if err := c.hooks.Call(ctx, hookName, hook, request, answer); err != nil {
			if response == nil {
				return 0, c.syncFailed(ctx, obj, err)
			}
			errs = append(errs, err)
			break
		}
		c.answers.ReportUnknown(ctx, obj, hookName, answer.UnknownFields)
		desired, err := c.attachments.Desired(obj, ref, "attachments", answer.Attachments, c.markAttachment)
		if err != nil {
			err = fmt.Errorf("invalid %s hook response: %w", hookName, err)
		} else if manage && !finalizing {
			// An answer without attachments while there are some is
			// refused (unless the controller opts out), as a composite's
			// without children is.
			err = c.answers.CheckList(ctx, hookName, answer.AttachmentsAbsent, controller.Count(observed), answer.UnknownFields)
		}
		if err != nil {
			if response == nil {
				return 0, c.syncFailed(ctx, obj, err)
			}
			errs = append(errs, err)
			break
		}
		response = answer
		// The answer's labels, annotations and status are written even
		// when some attachments failed, as a composite's status is.
		var metadataChanged, statusChanged bool
		seen, metadataChanged, statusChanged = asAnswered(seen, answer)
		if !answer.StatusUnchanged() {
			wantStatus = answer.Status
		}
		wrote := false
		if manage {
			result, err := c.writer.Manage(ctx, obj, c.attachments.Resources, observed, desired)
			if err != nil {
				errs = append(errs, err)
				break
			}
			for _, written := range result.Written {
				c.echoes.Expect(written)
			}
			observed, wrote = result.Observed, result.Wrote()
		}
		settled = !wrote && !metadataChanged && (!statusChanged || w.ignoreStatus)
	}

	// 5. Labels and annotations, as the answers left them.
	patched, err := c.patchMetadata(ctx, client, obj, seen)
	if err != nil {
		errs = append(errs, err)
	} else if patched != nil {
		obj = patched
	}

	// 6. Status, when an answer gave one (null leaves it, whatever others
	// wrote meanwhile).
	if wantStatus != nil {
		written, err := status.Replace(ctx, status.DynamicPatch(client), w.GroupVersionResource().GroupResource(), obj, wantStatus, w.HasStatus)
		if err != nil {
			errs = append(errs, err)
		} else if written != nil {
			metrics.ObjectWrites.WithLabelValues(c.name, "patch", "status").Inc()
			c.echoes.Expect(written)
			obj = written.(*unstructured.Unstructured) // DynamicPatch's
		}
	}

	// 7. The finalizer, once the finalize hook is done.
	if finalizing && response.Finalized && len(errs) == 0 {
		if _, err := c.setFinalizer(ctx, client, obj, c.finalizer, finalizer.Remove); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, c.syncFailed(ctx, obj, err)
	}
	// 8. Again with backoff when the hook did not settle; a later sync when
	// it asked for one.
	return c.unsettled.Finish(obj, key, settled, response.ResyncAfterSeconds, c.loop.AddAfter)
}

// asAnswered returns obj as answer's labels, annotations and status leave
// it (a shallow copy; obj is not changed), and whether they change its
// labels or annotations, and its status.
func asAnswered(obj *unstructured.Unstructured, answer *hooks.DecoratorSyncResponse) (out *unstructured.Unstructured, metadataChanged, statusChanged bool) {
	apply := func(have map[string]string, changes map[string]*string) map[string]string {
		out := maps.Clone(have)
		for k, v := range changes {
			current, exists := out[k]
			switch {
			case v == nil && exists:
				delete(out, k)
				metadataChanged = true
			case v != nil && (!exists || current != *v):
				if out == nil {
					out = map[string]string{}
				}
				out[k] = *v
				metadataChanged = true
			}
		}
		return out
	}
	labels := apply(obj.GetLabels(), answer.Labels)
	annotations := apply(obj.GetAnnotations(), answer.Annotations)
	out = &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	if metadataChanged {
		meta, _ := obj.Object["metadata"].(map[string]any)
		out.Object["metadata"] = maps.Clone(meta)
		out.SetLabels(labels)
		out.SetAnnotations(annotations)
	}
	if !answer.StatusUnchanged() {
		given, _ := obj.Object["status"].(map[string]any)
		statusChanged = !status.Equal(given, answer.Status)
		out.Object["status"] = answer.Status
	}
	return out, metadataChanged, statusChanged
}

// observedAttachments returns the object's attachments: the objects of each
// attachment resource it controls that carry this controller's annotation.
func (c *Controller) observedAttachments(obj *unstructured.Unstructured) map[*children.Resource]children.Set {
	out := make(map[*children.Resource]children.Set, len(c.attachments.Resources))
	for _, res := range c.attachments.Resources {
		set := children.Set{}
		for _, meta := range res.Informer.OwnedByMeta(obj.GetUID()) {
			if meta.Annotations[AttachmentAnnotation] != c.name {
				continue // another decorator's, or a child of another kind of owner
			}
			if a, err := meta.Unstructured(); err == nil {
				set[children.Key(a)] = a
			} else {
				utilruntime.HandleError(err)
			}
		}
		out[res] = set
	}
	return out
}

// markAttachment annotates a desired attachment as this controller's.
func (c *Controller) markAttachment(obj *unstructured.Unstructured) error {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AttachmentAnnotation] = c.name
	obj.SetAnnotations(a)
	return nil
}

// patchMetadata makes obj's labels and annotations those of want: it sets
// the keys want adds or changes and removes those it lacks, in one merge
// patch with obj's UID as precondition. It writes only when something
// changes, and returns the patched object (nil if none).
func (c *Controller) patchMetadata(ctx context.Context, client dynamic.ResourceInterface, obj, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	changes := func(want, have map[string]string) map[string]any {
		out := map[string]any{}
		for k, v := range want {
			if current, exists := have[k]; !exists || current != v {
				out[k] = v
			}
		}
		for k := range have {
			if _, kept := want[k]; !kept {
				out[k] = nil
			}
		}
		return out
	}
	md := map[string]any{}
	if l := changes(want.GetLabels(), obj.GetLabels()); len(l) > 0 {
		md["labels"] = l
	}
	if a := changes(want.GetAnnotations(), obj.GetAnnotations()); len(a) > 0 {
		md["annotations"] = a
	}
	if len(md) == 0 {
		return nil, nil
	}
	md["uid"] = obj.GetUID() // precondition: the same object
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return nil, err
	}
	metrics.ObjectWrites.WithLabelValues(c.name, "patch", "metadata").Inc()
	patched, err := client.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("patching labels and annotations: %w", err)
	}
	c.echoes.Expect(patched)
	klog.FromContext(ctx).V(4).Info("Patched labels and annotations", "patch", string(patch))
	return patched, nil
}

func (c *Controller) setFinalizer(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured, name string, op func(context.Context, dynamic.ResourceInterface, *unstructured.Unstructured, string) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	patched, err := op(ctx, client, obj, name)
	if err != nil {
		return nil, err
	}
	if patched != obj {
		metrics.ObjectWrites.WithLabelValues(c.name, "patch", "finalizer").Inc()
		c.echoes.Expect(patched)
	}
	return patched, nil
}

// removeStaleFinalizer removes the finalizer of this controller from an
// object when the controller has no finalize hook (any more).
func (c *Controller) removeStaleFinalizer(ctx context.Context, client dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	if c.finalizer != "" {
		return nil
	}
	_, err := c.setFinalizer(ctx, client, obj, finalizerPrefix+c.name, finalizer.Remove)
	return err
}

// syncFailed reports a failed sync of obj (controller.SyncFailed) and
// returns err for the retry.
func (c *Controller) syncFailed(ctx context.Context, obj *unstructured.Unstructured, err error) error {
	return controller.SyncFailed(ctx, c.opts.Recorder, obj, "decoratorcontroller", c.name, err)
}
