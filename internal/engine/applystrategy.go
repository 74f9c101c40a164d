package engine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

// ApplyStrategy is how a controller writes its children: ApplyClientSide
// (the three-way merge of pkg/dynamic/apply, with its last-applied
// annotation) or ApplyServerSide (server-side apply, one field manager per
// controller). docs/apply-strategies.md compares them.
type ApplyStrategy string

const (
	// ApplyClientSide is the default strategy, metacontroller's
	// "dynamic-apply" (its default).
	ApplyClientSide ApplyStrategy = "client-side"
	// ApplyServerSide is metacontroller's "server-side-apply".
	ApplyServerSide ApplyStrategy = "server-side"
)

// ApplyStrategyAnnotation on a CompositeController or DecoratorController
// chooses its ApplyStrategy, whatever Options.ApplyStrategy says; it takes
// the values ParseApplyStrategy accepts.
const ApplyStrategyAnnotation = "metactl.io/apply-strategy"

// applyStrategyNames are the values ParseApplyStrategy accepts:
// metactl's, then metacontroller's (its --apply-strategy takes
// dynamic-apply and server-side-apply), then three-way-merge, another name
// of the client-side strategy.
var applyStrategyNames = []string{"client-side", "server-side", "dynamic-apply", "server-side-apply", "three-way-merge"}

// ParseApplyStrategy reads a strategy by metactl's name (client-side,
// server-side), metacontroller's (dynamic-apply, server-side-apply) or
// three-way-merge (client-side).
func ParseApplyStrategy(s string) (ApplyStrategy, error) {
	switch s {
	case "client-side", "dynamic-apply", "three-way-merge":
		return ApplyClientSide, nil
	case "server-side", "server-side-apply":
		return ApplyServerSide, nil
	}
	return "", fmt.Errorf("unknown apply strategy %q: want one of %q", s, applyStrategyNames)
}

// validateApplyStrategyAnnotation checks the value of
// ApplyStrategyAnnotation on a controller object: absent, or a value
// ParseApplyStrategy accepts.
func validateApplyStrategyAnnotation(annotations map[string]string) field.ErrorList {
	v, ok := annotations[ApplyStrategyAnnotation]
	if !ok {
		return nil
	}
	if _, err := ParseApplyStrategy(v); err == nil {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(ApplyStrategyAnnotation), v, applyStrategyNames)}
}

// applyStrategyOf is the strategy of a controller object: its annotation
// (validated by DecodeSpec), else the default (Options.ApplyStrategy, ""
// meaning ApplyClientSide).
func applyStrategyOf(obj *unstructured.Unstructured, def ApplyStrategy) ApplyStrategy {
	if v, ok := obj.GetAnnotations()[ApplyStrategyAnnotation]; ok {
		if s, err := ParseApplyStrategy(v); err == nil {
			return s
		}
	}
	if def == "" {
		return ApplyClientSide
	}
	return def
}

// FieldManagerPrefix starts the name of the field manager with which a
// controller applies its children server-side: FieldManagerPrefix + the
// controller object's name.
const FieldManagerPrefix = children.FieldManagerPrefix

// serverSide is the children.Writer setting of a controller object: nil
// for client-side apply.
func serverSide(obj *unstructured.Unstructured, opts Options) *children.ServerSide {
	if applyStrategyOf(obj, opts.ApplyStrategy) != ApplyServerSide {
		return nil
	}
	return &children.ServerSide{FieldManager: FieldManagerPrefix + obj.GetName(), Force: !opts.RefuseApplyConflicts}
}

// ChildDiffers reports whether the controller, writing desired over
// observed, a child, would change it (its dependentWriter's Differs, as
// its ApplyStrategy writes; the three-way merge's rule for a nil Engine).
func (e *Engine) ChildDiffers(observed, desired *unstructured.Unstructured) (bool, error) {
	if e != nil {
		return e.dependents.Differs(observed, desired)
	}
	_, changed, err := apply.Apply(observed, desired)
	return changed, err
}
