package composite

import (
	"context"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/hooks"
)

// Observe returns the parent's children: the owned ones, and the orphans
// it adopts (engine.Controller). With rolling child resources, the sync
// runs rollingSync's steps, the finalize hook's too (as metacontroller
// does while the parent has its finalizer), unless the garbage collector
// holds the children.
func (c *Controller) Observe(ctx context.Context, t *engine.Target) (engine.Sync, map[*children.Resource]children.Set, error) {
	parent := t.Object
	selector, err := c.childSelector(parent)
	if err != nil {
		return nil, nil, err
	}
	observed, err := c.claimChildren(ctx, t, selector)
	if err != nil {
		return nil, nil, fmt.Errorf("claiming children: %w", err)
	}
	s := &parentSync{c: c, parent: parent, selector: selector}
	if c.revisions != nil && t.Manage {
		return &rollingParentSync{s}, observed, nil
	}
	return s, observed, nil
}

// parentSync is one sync of one parent (engine.Sync).
type parentSync struct {
	c        *Controller
	parent   *unstructured.Unstructured
	selector labels.Selector
}

func (s *parentSync) Request(seen *unstructured.Unstructured, dependents, related hooks.ObjectMap, finalizing bool) (any, hooks.Response) {
	return s.c.request(seen, dependents, related, finalizing), &hooks.CompositeSyncResponse{}
}

// request is the request of a sync (finalize) hook call.
func (c *Controller) request(parent *unstructured.Unstructured, observed, related hooks.ObjectMap, finalizing bool) *hooks.CompositeSyncRequest {
	return &hooks.CompositeSyncRequest{Controller: c.object, Parent: parent, Children: observed, Related: related, Finalizing: finalizing}
}

// Read reads an answer; its status gets observedGeneration, the parent's
// generation.
func (s *parentSync) Read(response hooks.Response) engine.Answer {
	r := response.(*hooks.CompositeSyncResponse)
	status := make(map[string]any, len(r.Status)+1)
	maps.Copy(status, r.Status)
	status["observedGeneration"] = s.parent.GetGeneration()
	return engine.Answer{Unknown: r.UnknownFields, ListAbsent: r.ChildrenAbsent, Status: status,
		ResyncAfterSeconds: r.ResyncAfterSeconds, Finalized: r.Finalized, Events: r.Events}
}

func (s *parentSync) Desired(response hooks.Response) (map[*children.Resource]children.Set, error) {
	return s.c.desiredChildren(s.parent, s.selector, response.(*hooks.CompositeSyncResponse).Children)
}

// rollingParentSync is the sync of a parent with rolling child resources:
// one hook call per live revision (engine.Stepper).
type rollingParentSync struct{ *parentSync }

func (s *rollingParentSync) Step(ctx context.Context, r *engine.Round, seen *unstructured.Unstructured) (hooks.Response, bool, error) {
	response, result, err := s.c.rollingSync(ctx, r, seen, s.selector)
	if response == nil {
		return nil, false, err
	}
	return response, result, err
}

// ignoreStatusChanges reports whether the controller ignores status-only
// changes of its parents, its own status writes included.
func (c *Controller) ignoreStatusChanges() bool {
	return c.cc.Spec.ParentResource.IgnoreStatusChanges != nil && *c.cc.Spec.ParentResource.IgnoreStatusChanges
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
