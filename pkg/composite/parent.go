package composite

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
)

// ControllerUIDLabel labels the children of a parent whose controller
// generates selectors.
const ControllerUIDLabel = "controller-uid"

// finalizerPrefix starts the finalizer of every CompositeController.
const finalizerPrefix = "metacontroller.io/compositecontroller-"

// childSelector returns the selector a parent's children must match:
// controller-uid=<uid> with generateSelector, else the parent's
// spec.selector, which must exist and select by presence (see
// selectsByPresence).
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
	selector, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, fmt.Errorf("the parent's spec.selector is invalid: %w", err)
	}
	if !selectsByPresence(selector) {
		shown := selector.String()
		if shown == "" {
			shown = "empty"
		}
		return nil, fmt.Errorf("the parent's spec.selector (%s) matches objects by the absence of labels only, "+
			"so it would adopt every orphan of the child resources and delete those the hook does not return: "+
			"add a matchLabels entry, or a matchExpressions requirement with operator In or Exists", shown)
	}
	return selector, nil
}

// selectsByPresence reports whether selector requires a label to be
// present: it has at least one requirement of operator Equals, In or
// Exists. One without (empty, or only NotIn and DoesNotExist) matches
// every object that lacks some labels, which for adoption means every
// orphan; metactl refuses it as a child selector.
func selectsByPresence(selector labels.Selector) bool {
	requirements, _ := selector.Requirements()
	for _, r := range requirements {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In, selection.Exists:
			return true
		}
	}
	return false
}
