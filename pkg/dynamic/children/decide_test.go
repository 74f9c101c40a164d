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

// TestRecreateIgnoresElementsOthersAdded: a Recreate child whose lists
// hold elements the server added (a Pod's default tolerations, which have
// no merge key, so the merge replaces the list wholesale) is not recreated
// when the hook's answer is the same, as a new child would get them again
// (metacontroller issue #863); a change of the answer, or an element of
// the hook's list that another writer removed or changed, still recreates
// it; InPlace still writes the hook's list.
func TestRecreateIgnoresElementsOthersAdded(t *testing.T) {
	toleration := func(key string) map[string]any {
		return map[string]any{"key": key, "operator": "Exists", "effect": "NoExecute"}
	}
	pod := func(tolerations ...any) *unstructured.Unstructured {
		obj := object("v1", "Pod", "ns", "p")
		obj.Object["spec"] = map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}, "tolerations": tolerations}
		return obj
	}
	// created is the child as Manage created it from desired, then as the
	// server holds it with tolerations (the whole list) instead.
	created := func(desired *unstructured.Unstructured, tolerations ...any) *unstructured.Unstructured {
		obj := desired.DeepCopy()
		if err := apply.SetLastApplied(obj, desired.Object); err != nil {
			t.Fatal(err)
		}
		obj.Object["spec"].(map[string]any)["tolerations"] = tolerations
		return obj
	}
	mine, other, defaulted := toleration("mine"), toleration("other"), toleration("node.kubernetes.io/not-ready")
	for _, c := range []struct {
		name              string
		observed, desired *unstructured.Unstructured
		recreate, inPlace Action
	}{
		{"the server appended one", created(pod(mine), mine, defaulted), pod(mine), None, Update},
		{"the server added one before", created(pod(mine), defaulted, mine), pod(mine), None, Update},
		{"the hook's answer changed", created(pod(mine), mine, defaulted), pod(mine, other), Recreate, Update},
		{"the hook dropped one that is still there", created(pod(mine, other), mine, other, defaulted), pod(mine), Recreate, Update},
		{"another writer removed the hook's", created(pod(mine), defaulted), pod(mine), Recreate, Update},
	} {
		for method, want := range map[v1alpha1.ChildUpdateMethod]Action{v1alpha1.ChildUpdateRecreate: c.recreate, v1alpha1.ChildUpdateRollingRecreate: c.recreate, v1alpha1.ChildUpdateInPlace: c.inPlace} {
			if action, _, err := Decide(method, c.observed, c.desired); err != nil || action != want {
				t.Errorf("%s, %s: %v, %v; want %v", c.name, method, action, err, want)
			}
		}
	}
}
