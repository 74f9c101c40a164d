package children

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
)

// Action is what Manage does with one child.
type Action int

const (
	// None: nothing is written. The child is as desired; or it is being
	// deleted (desired, it is created again by a later call once it is
	// gone); or neither observed nor desired.
	None Action = iota
	// Create: the desired child is not observed; it is created.
	Create
	// Update: the observed child differs from the desired one; the
	// three-way merge (merged) is written (InPlace, RollingInPlace).
	Update
	// Recreate: the observed child differs from the desired one; it is
	// deleted, and created again by a later call once it is gone
	// (Recreate, RollingRecreate). A child that differs only by elements
	// others added to its lists is not recreated: the server would add
	// them again (apply.OnlyAddedByOthers).
	Recreate
	// Kept: the observed child differs from the desired one, but its
	// update method (OnDelete) keeps it as it is.
	Kept
	// Delete: the observed child is not desired; it is deleted.
	Delete
)

// Decide returns what Manage does with one child of a resource updated by
// method, given the object observed (nil: none) and the one desired (nil:
// not desired). For Update, Recreate and Kept, merged is the three-way
// merge of desired over observed (apply.Apply); err is the merge's error,
// with None (never for OnDelete, which writes nothing whatever the merge
// says). It writes nothing and calls the merge only when both objects are
// there and the observed one is not being deleted.
func Decide(method v1alpha1.ChildUpdateMethod, observed, desired *unstructured.Unstructured) (action Action, merged *unstructured.Unstructured, err error) {
	return decide(method, observed, desired, apply.Apply)
}

// decide is Decide with merge computing what to write and whether it
// changes observed (apply.Apply, or apply.ServerSide).
func decide(method v1alpha1.ChildUpdateMethod, observed, desired *unstructured.Unstructured, merge func(observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool, error)) (action Action, merged *unstructured.Unstructured, err error) {
	switch {
	case desired == nil:
		if observed == nil || observed.GetDeletionTimestamp() != nil {
			return None, nil, nil
		}
		return Delete, nil, nil
	case observed == nil:
		return Create, nil, nil
	case observed.GetDeletionTimestamp() != nil:
		return None, nil, nil
	}
	merged, changed, err := merge(observed, desired)
	if method == v1alpha1.ChildUpdateOnDelete {
		if err != nil || !changed {
			return None, nil, nil
		}
		return Kept, merged, nil
	}
	switch {
	case err != nil:
		return None, nil, err
	case !changed:
		return None, nil, nil
	case method == v1alpha1.ChildUpdateRecreate || method == v1alpha1.ChildUpdateRollingRecreate:
		if apply.OnlyAddedByOthers(observed.Object, merged.Object) {
			// Only elements others added to the hook's lists differ:
			// a new child would get them again (apply.OnlyAddedByOthers).
			return None, nil, nil
		}
		return Recreate, merged, nil
	}
	return Update, merged, nil
}
