package children

import (
	"testing"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// TestDeclare: a resource declared twice is one entry, with the method and
// status checks of the last entry whose method is not OnDelete (the
// default), as metacontroller's map of update strategies keeps them.
func TestDeclare(t *testing.T) {
	pods := &discovery.Resource{APIVersion: "v1", Name: "pods", Kind: "Pod", Namespaced: true}
	cms := &discovery.Resource{APIVersion: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true}
	checksA := &v1alpha1.ChildUpdateStatusChecks{Conditions: []v1alpha1.StatusConditionCheck{{Type: "A"}}}
	checksB := &v1alpha1.ChildUpdateStatusChecks{Conditions: []v1alpha1.StatusConditionCheck{{Type: "B"}}}
	for name, tc := range map[string]struct {
		entries    []*Resource
		want       v1alpha1.ChildUpdateMethod
		wantChecks *v1alpha1.ChildUpdateStatusChecks
	}{
		"later wins": {entries: []*Resource{{Resource: pods, Method: v1alpha1.ChildUpdateOnDelete}, {Resource: pods, Method: v1alpha1.ChildUpdateInPlace}},
			want: v1alpha1.ChildUpdateInPlace},
		"a later OnDelete does not": {entries: []*Resource{{Resource: pods, Method: v1alpha1.ChildUpdateInPlace}, {Resource: pods, Method: v1alpha1.ChildUpdateOnDelete}},
			want: v1alpha1.ChildUpdateInPlace},
		"nor a later unset method": {entries: []*Resource{{Resource: pods, Method: v1alpha1.ChildUpdateRecreate}, {Resource: pods}},
			want: v1alpha1.ChildUpdateRecreate},
		"status checks go with the method": {entries: []*Resource{
			{Resource: pods, Method: v1alpha1.ChildUpdateRollingRecreate, StatusChecks: checksA},
			{Resource: pods, Method: v1alpha1.ChildUpdateRollingInPlace, StatusChecks: checksB},
			{Resource: pods, Method: v1alpha1.ChildUpdateOnDelete, StatusChecks: checksA}},
			want: v1alpha1.ChildUpdateRollingInPlace, wantChecks: checksB},
	} {
		t.Run(name, func(t *testing.T) {
			var declared []*Resource
			declared, first := Declare(declared, &Resource{Resource: cms, Method: v1alpha1.ChildUpdateInPlace})
			if first != -1 {
				t.Fatalf("a new resource: earlier %d, want -1", first)
			}
			for i, e := range tc.entries {
				var earlier int
				declared, earlier = Declare(declared, e)
				if want := map[bool]int{true: -1, false: 1}[i == 0]; earlier != want {
					t.Fatalf("entry %d: earlier %d, want %d", i, earlier, want)
				}
			}
			if len(declared) != 2 {
				t.Fatalf("%d entries, want 2", len(declared))
			}
			if got := declared[1]; got.Method != tc.want || got.StatusChecks != tc.wantChecks {
				t.Errorf("pods update with %q and checks %v, want %q and %v", got.Method, got.StatusChecks, tc.want, tc.wantChecks)
			}
			if declared[0].Method != v1alpha1.ChildUpdateInPlace {
				t.Errorf("configmaps changed: %q", declared[0].Method)
			}
		})
	}
}
