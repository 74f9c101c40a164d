package children

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
)

// TestDecide: what Manage does with one child, per update method (the
// writes themselves are checked against the API server in manage_test.go).
func TestDecide(t *testing.T) {
	cm := func(value string) *unstructured.Unstructured {
		obj := object("v1", "ConfigMap", "ns", "a")
		obj.Object["data"] = map[string]any{"k": value}
		return obj
	}
	// written is a child as Manage creates it from cm(value).
	written := func(value string) *unstructured.Unstructured {
		obj := cm(value)
		if err := apply.SetLastApplied(obj, cm(value).Object); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	deleting := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		now := metav1.Now()
		obj.SetDeletionTimestamp(&now)
		return obj
	}
	all := []v1alpha1.ChildUpdateMethod{v1alpha1.ChildUpdateOnDelete, v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateInPlace,
		v1alpha1.ChildUpdateRollingRecreate, v1alpha1.ChildUpdateRollingInPlace, ""}
	for _, method := range all {
		changed := Update
		switch method {
		case v1alpha1.ChildUpdateOnDelete:
			changed = Kept
		case v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateRollingRecreate:
			changed = Recreate
		}
		for _, c := range []struct {
			name              string
			observed, desired *unstructured.Unstructured
			want              Action
		}{
			{"missing", nil, cm("x"), Create},
			{"not desired", written("x"), nil, Delete},
			{"not desired, being deleted", deleting(written("x")), nil, None},
			{"neither", nil, nil, None},
			{"as desired", written("x"), cm("x"), None},
			{"changed", written("x"), cm("y"), changed},
			{"changed, being deleted", deleting(written("x")), cm("y"), None},
		} {
			action, merged, err := Decide(method, c.observed, c.desired)
			if err != nil || action != c.want {
				t.Errorf("%q %s: %v, %v; want %v", method, c.name, action, err, c.want)
			}
			if hasMerge := action == Update || action == Recreate || action == Kept; hasMerge != (merged != nil) {
				t.Errorf("%q %s: %v with merged %v", method, c.name, action, merged)
			} else if hasMerge && merged.Object["data"].(map[string]any)["k"] != "y" {
				t.Errorf("%q %s: merged %v", method, c.name, merged.Object)
			}
		}
	}
}
