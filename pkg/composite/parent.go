package composite

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
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
