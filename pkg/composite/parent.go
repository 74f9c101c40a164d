package composite

import (
	"context"
	"errors"
	"fmt"

	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/metrics"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// ControllerUIDLabel labels the children of a parent whose controller
// generates selectors.
const ControllerUIDLabel = "controller-uid"

// finalizerPrefix starts the finalizer of every CompositeController.
const finalizerPrefix = "metacontroller.io/compositecontroller-"

// childSelector returns the selector a parent's children must match:
// controller-uid=<uid> with generateSelector, else the parent's
// spec.selector, which must exist and not be empty.
func (c *Controller) childSelector(parent *unstructured.Unstructured) (labels.Selector, error) {
	if c.cc.Spec.GenerateSelector != nil && *c.cc.Spec.GenerateSelector {
		return labels.SelectorFromSet(labels.Set{ControllerUIDLabel: string(parent.GetUID())}), nil
	}
	raw, found, err := unstructured.NestedMap(parent.Object, "spec", "selector")
	if err != nil || !found {
		return nil, errors.New("the parent has no spec.selector; give it one, or set generateSelector on the CompositeController")
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return nil, fmt.Errorf("the parent's spec.selector is not a label selector: %w", err)
	}
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return nil, errors.New("the parent's spec.selector is empty, which would select everything: give it matchLabels or matchExpressions")
	}
	selector, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, fmt.Errorf("the parent's spec.selector is invalid: %w", err)
	}
	return selector, nil
}

// setFinalizer adds or removes (op) the controller's finalizer on the
// parent and returns the parent as written.
func (c *Controller) setFinalizer(ctx context.Context, parent *unstructured.Unstructured, op finalizerOp) (*unstructured.Unstructured, error) {
	return c.setNamedFinalizer(ctx, parent, c.finalizer, op)
}

type finalizerOp func(context.Context, dynamic.ResourceInterface, *unstructured.Unstructured, string) (*unstructured.Unstructured, error)

func (c *Controller) setNamedFinalizer(ctx context.Context, parent *unstructured.Unstructured, name string, op finalizerOp) (*unstructured.Unstructured, error) {
	client := c.opts.Client.Resource(c.parent.GroupVersionResource()).Namespace(parent.GetNamespace())
	patched, err := op(ctx, client, parent, name)
	if err != nil {
		return nil, err
	}
	if patched != parent {
		metrics.ObjectWrites.WithLabelValues(c.name, "patch", "finalizer").Inc()
		c.echoes.Expect(patched)
		klog.FromContext(ctx).V(4).Info("Set parent finalizers", "finalizers", patched.GetFinalizers())
	}
	return patched, nil
}

// removeStaleFinalizer removes the finalizer this controller put on the
// parent while it had a finalize hook, now that it has none; otherwise a
// deleted parent would wait for a hook that is never called.
func (c *Controller) removeStaleFinalizer(ctx context.Context, parent *unstructured.Unstructured) error {
	if c.finalizer != "" {
		return nil
	}
	_, err := c.setNamedFinalizer(ctx, parent, finalizerPrefix+c.name, finalizer.Remove)
	return err
}

// updateStatus replaces the parent's status with want (see statusFor),
// unless that is what it already has. When seen, the hook was given want
// and the write's watch event, its echo, needs no sync; else it syncs the
// parent again, so that the hook is given the status it asked for.
func (c *Controller) updateStatus(ctx context.Context, parent *unstructured.Unstructured, want map[string]any, seen bool) error {
	gvr := c.parent.GroupVersionResource()
	// The answer is needed only for its resourceVersion (the echo), so it
	// goes through the client that decodes only metadata.
	patch := func(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
		patched, err := c.opts.Objects.Patch(ctx, gvr, parent.GetNamespace(), name, pt, data, subresources...)
		if err != nil {
			return nil, err
		}
		return patched, nil
	}
	patched, err := status.Replace(ctx, patch, gvr.GroupResource(), parent, want, c.parent.HasStatus)
	if err != nil || patched == nil {
		return err
	}
	metrics.ObjectWrites.WithLabelValues(c.name, "patch", "status").Inc()
	if seen {
		c.echoes.Expect(patched)
	}
	klog.FromContext(ctx).V(4).Info("Updated parent status")
	return nil
}
