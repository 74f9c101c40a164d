package decorator

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
	"github.com/metactl/metactl/pkg/hooks"
)

// Observe returns the object's attachments: ours, by owner UID and
// annotation; attachments are never adopted (engine.Controller).
func (c *Controller) Observe(ctx context.Context, t *engine.Target) (engine.Sync, map[*children.Resource]children.Set, error) {
	ref := ownership.ControllerRef(t.Object, t.Resource.GroupVersionKind())
	observed, err := c.observedAttachments(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	return &objectSync{c: c, obj: t.Object, ref: ref}, observed, nil
}

// objectSync is one sync of one decorated object (engine.Sync).
type objectSync struct {
	c   *Controller
	obj *unstructured.Unstructured
	ref metav1.OwnerReference
}

func (s *objectSync) Request(seen *unstructured.Unstructured, dependents, related hooks.ObjectMap, finalizing bool) (any, hooks.Response) {
	return &hooks.DecoratorSyncRequest{
		Controller:  s.c.object,
		Object:      seen,
		Attachments: dependents,
		Related:     related,
		Finalizing:  finalizing,
	}, &hooks.DecoratorSyncResponse{}
}

// Read reads an answer: a null status leaves the status, whatever others
// write meanwhile.
func (s *objectSync) Read(response hooks.Response) engine.Answer {
	r := response.(*hooks.DecoratorSyncResponse)
	return engine.Answer{
		Unknown:            r.UnknownFields,
		ListAbsent:         r.AttachmentsAbsent,
		Status:             r.Status,
		Labels:             r.Labels,
		Annotations:        r.Annotations,
		ResyncAfterSeconds: r.ResyncAfterSeconds,
		Finalized:          r.Finalized,
		Events:             r.Events,
	}
}

func (s *objectSync) Desired(response hooks.Response) (map[*children.Resource]children.Set, error) {
	return s.c.attachments.Desired(s.obj, s.ref, "attachments", response.(*hooks.DecoratorSyncResponse).Attachments, s.c.markAttachment)
}

// observedAttachments returns the attachments of t's object: the objects
// of each attachment resource it controls that carry this controller's
// annotation. They are counted for the hook request
// (engine.Target.CountRequest) before any is decoded; over the limit none
// is, and the error is returned.
func (c *Controller) observedAttachments(ctx context.Context, t *engine.Target) (map[*children.Resource]children.Set, error) {
	obj := t.Object
	out := make(map[*children.Resource]children.Set, len(c.attachments.Resources))
	for _, res := range c.attachments.Resources {
		set := children.Set{}
		var mine []*informer.Object
		for _, meta := range res.Informer.OwnedByMeta(obj.GetNamespace(), obj.GetUID()) {
			if c.isAttachment(meta) { // not another decorator's, nor a child of another kind of owner
				mine = append(mine, meta)
			}
		}
		if err := t.CountRequest(ctx, "attachments of "+res.GroupVersionResource().GroupResource().String(), mine); err != nil {
			return nil, err
		}
		for _, meta := range mine {
			if a, err := meta.Unstructured(); err == nil {
				set[children.Key(a)] = a
			} else {
				utilruntime.HandleError(err)
			}
		}
		out[res] = set
	}
	return out, nil
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
