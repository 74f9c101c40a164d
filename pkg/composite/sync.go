package composite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/controller"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// sync brings the children and status of the parent named by key to what
// the hook wants. It is the whole reconcile, in order; see the package doc.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil // not a key we made; nothing to retry
	}
	// Events for this parent that arrive meanwhile are judged at the end,
	// once this sync's writes are known: echoes of them need no new sync.
	c.echoes.Begin(key)
	defer func() {
		if c.echoes.End(key) {
			c.loop.Add(key)
		}
	}()

	// 1. The parent, from the cache. A parent that is gone takes its
	// children with it through garbage collection.
	parent, ok := c.parentInformer.Get(namespace, name)
	if !ok {
		if c.related != nil {
			c.related.Forget(key)
		}
		c.unsettled.Settled(key)
		return 0, nil
	}
	logger := klog.FromContext(ctx).WithValues("parent", klog.KObj(parent))
	ctx = klog.NewContext(ctx, logger)

	selected := c.parentSelector == nil || c.parentSelector.Matches(labels.Set(parent.GetLabels()))
	deleting := parent.GetDeletionTimestamp() != nil
	hasFinalizer := c.finalizer != "" && finalizer.Has(parent, c.finalizer)
	finalizing := false
	switch {
	case deleting || !selected:
		if !hasFinalizer {
			// Not ours to manage any more: no finalize hook to run.
			c.unsettled.Settled(key)
			return 0, c.removeStaleFinalizer(ctx, parent)
		}
		finalizing = true
	case c.finalizer != "" && !hasFinalizer:
		// The finalizer goes on before the first sync, so a delete from
		// now on waits for the finalize hook.
		if parent, err = c.setFinalizer(ctx, parent, finalizer.Add); err != nil {
			return 0, err
		}
	case c.finalizer == "":
		if err := c.removeStaleFinalizer(ctx, parent); err != nil {
			return 0, err
		}
	}

	// 2. Its children: owned ones, and orphans it adopts.
	selector, err := c.childSelector(parent)
	if err != nil {
		return 0, c.syncFailed(ctx, parent, err)
	}
	observed, err := c.claimChildren(ctx, parent, selector)
	if err != nil {
		return 0, c.syncFailed(ctx, parent, fmt.Errorf("claiming children: %w", err))
	}

	// 3. Related objects, when a customize hook declares them.
	relatedObjects := hooks.ObjectMap{}
	if c.related != nil {
		if relatedObjects, err = c.related.Related(ctx, key, parent, c.parent.Namespaced); err != nil {
			return 0, c.syncFailed(ctx, parent, fmt.Errorf("related objects: %w", err))
		}
	}

	// 4-5. The hook, its answer checked whole, then the children written,
	// and again until the hook settles (hookAndChildren; rollingSync for
	// rolling child resources). A failed call or an invalid answer writes
	// nothing.
	hook, hookName := c.cc.Spec.Hooks.Sync, "sync"
	if finalizing {
		hook, hookName = c.cc.Spec.Hooks.Finalize, "finalize"
	}
	manage := !finalizer.HeldByGarbageCollector(parent)
	var (
		response   *hooks.CompositeSyncResponse
		settled    = true
		statusSeen = true // the hook was given the status it asked for last
		errs       []error
	)
	if c.revisions != nil && !finalizing && manage {
		// Rolling child resources: one hook call per live revision.
		response, settled, statusSeen, err = c.rollingRounds(ctx, parent, selector, observed, relatedObjects)
	} else {
		response, settled, err = c.hookAndChildren(ctx, parent, selector, observed, relatedObjects, hookName, hook, finalizing, manage)
	}
	if response == nil {
		return 0, c.syncFailed(ctx, parent, err)
	}
	if err != nil {
		errs = append(errs, err)
	}

	// 6. Status, even when some children failed; then the finalizer.
	if err := c.updateStatus(ctx, parent, c.statusFor(parent, response.Status), statusSeen); err != nil {
		errs = append(errs, err)
	}
	if finalizing && response.Finalized && len(errs) == 0 {
		if _, err := c.setFinalizer(ctx, parent, finalizer.Remove); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, c.syncFailed(ctx, parent, err)
	}

	// 7. Again with backoff when the hook did not settle; a later sync
	// when it asked for one.
	return c.unsettled.Finish(parent, key, settled, response.ResyncAfterSeconds, c.loop.AddAfter)
}

// hookAndChildren calls the hook and writes the children it asks for, in
// rounds until the hook settles (see controller.MaxRounds): after an answer
// that wrote children or asks for a status other than the one the hook was
// given, the hook is called again with the children as written and the
// parent with that status, as if written. The status itself is written
// once, by the caller, from the last answer. With ignoreStatusChanges, only
// written children call for another round.
//
// It returns a nil response when the first call failed or its answer was
// invalid (nothing was written); else the last valid answer, whether it
// was a fixed point, and any error of the writes or of a later call.
func (c *Controller) hookAndChildren(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector, observed map[*children.Resource]children.Set, related hooks.ObjectMap, hookName string, hook *v1alpha1.Hook, finalizing, manage bool) (last *hooks.CompositeSyncResponse, settled bool, err error) {
	seen := parent // the parent as the hook is given it
	for round := 1; round <= controller.MaxRounds; round++ {
		response := &hooks.CompositeSyncResponse{}
		request := &hooks.CompositeSyncRequest{
			Controller: c.object,
			Parent:     seen,
			Children:   hooks.ObjectMapOf(*hook.Version, c.parent.Namespaced, c.children.Resources, observed),
			Related:    related,
			Finalizing: finalizing,
		}
		if err := c.hooks.Call(ctx, hookName, hook, request, response); err != nil {
			// After a first answer was applied, it stands: its status is
			// written, and the error retries the parent.
			return last, false, err
		}
		c.answers.ReportUnknown(ctx, parent, hookName, response.UnknownFields)
		if manage && !finalizing {
			// An answer without children while there are some is refused
			// (unless the controller opts out): a misspelt key must not
			// delete them all. A finalize hook's answer is read as
			// metacontroller reads it: the parent is going away.
			if err := c.answers.CheckList(ctx, hookName, response.ChildrenAbsent, controller.Count(observed), response.UnknownFields); err != nil {
				return last, false, err
			}
		}
		desired, err := c.desiredChildren(parent, selector, response.Children)
		if err != nil {
			return last, false, fmt.Errorf("invalid %s hook response: %w", hookName, err)
		}
		last = response
		wrote := false
		// The garbage collector owns the children while it deletes the
		// parent in the foreground or orphans them.
		if manage {
			result, err := c.writer.Manage(ctx, parent, c.children.Resources, observed, desired)
			if err != nil {
				return last, false, err
			}
			for _, obj := range result.Written {
				c.echoes.Expect(obj)
			}
			observed, wrote = result.Observed, result.Wrote()
		}
		want := c.statusFor(parent, response.Status)
		given, _ := seen.Object["status"].(map[string]any)
		statusChanged := !status.Equal(given, want)
		if !wrote && (!statusChanged || c.ignoreStatusChanges()) {
			return last, true, nil
		}
		if statusChanged {
			seen = withStatus(parent, want)
		}
	}
	return last, false, nil
}

// rollingRounds runs rollingSync in rounds, as hookAndChildren calls the
// hook, while the status it asks for (the Updated condition included) is
// not the one the hook was given, giving it that status as if written. A
// round that wrote children or ControllerRevisions ends the sync: a rolling
// update moves one child per sync, the next round would read revisions the
// cache has not caught up with, and the children's events start the next
// sync, as in metacontroller. It returns what hookAndChildren returns, and
// whether the hook was given the status of its last answer (when not, the
// status write's own event syncs the parent again).
func (c *Controller) rollingRounds(ctx context.Context, parent *unstructured.Unstructured, selector labels.Selector, observed map[*children.Resource]children.Set, related hooks.ObjectMap) (last *hooks.CompositeSyncResponse, settled, statusSeen bool, err error) {
	seen := parent
	for round := 1; round <= controller.MaxRounds; round++ {
		response, result, err := c.rollingSync(ctx, seen, selector, observed, related)
		if response == nil {
			return last, false, true, err
		}
		last = response
		if err != nil {
			return last, false, true, err
		}
		want := c.statusFor(parent, response.Status)
		given, _ := seen.Object["status"].(map[string]any)
		sameStatus := status.Equal(given, want) || c.ignoreStatusChanges()
		if sameStatus || result.Wrote() {
			return last, true, sameStatus, nil
		}
		seen, observed = withStatus(parent, want), result.Observed
	}
	return last, false, true, nil
}

// statusFor returns the status an answer asks for: the hook's status with
// observedGeneration set to the parent's generation.
func (c *Controller) statusFor(parent *unstructured.Unstructured, hookStatus map[string]any) map[string]any {
	want := make(map[string]any, len(hookStatus)+1)
	maps.Copy(want, hookStatus)
	want["observedGeneration"] = parent.GetGeneration()
	return want
}

// withStatus returns a shallow copy of obj whose status is status, for a
// hook request; obj is not changed.
func withStatus(obj *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	out.Object["status"] = status
	return out
}

// ignoreStatusChanges reports whether the controller ignores status-only
// changes of its parents, its own status writes included.
func (c *Controller) ignoreStatusChanges() bool {
	return c.cc.Spec.ParentResource.IgnoreStatusChanges != nil && *c.cc.Spec.ParentResource.IgnoreStatusChanges
}

// syncFailed reports a failed sync of parent (controller.SyncFailed) and
// returns err for the retry.
func (c *Controller) syncFailed(ctx context.Context, parent *unstructured.Unstructured, err error) error {
	return controller.SyncFailed(ctx, c.opts.Recorder, parent, "compositecontroller", c.name, err)
}

// canAdopt re-reads the parent, uncached, and allows adoption only when it
// still exists with the same UID and is not being deleted.
func (c *Controller) canAdopt(parent *unstructured.Unstructured) ownership.CanAdoptFunc {
	return func(ctx context.Context) error {
		metrics.UncachedReads.WithLabelValues(c.name, "adopt").Inc()
		fresh, err := c.opts.Client.Resource(c.parent.GroupVersionResource()).Namespace(parent.GetNamespace()).
			Get(ctx, parent.GetName(), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("re-reading parent: %w", err)
		}
		if fresh.GetUID() != parent.GetUID() {
			return fmt.Errorf("parent %s was replaced (UID %s, cached %s)", parent.GetName(), fresh.GetUID(), parent.GetUID())
		}
		if fresh.GetDeletionTimestamp() != nil {
			return fmt.Errorf("parent %s is being deleted", parent.GetName())
		}
		return nil
	}
}
