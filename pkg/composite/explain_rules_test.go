package composite

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestExplainDependentsOfARollingParent: what `metactl explain` says of a
// rolling parent's children (ExplainDependents), from the cache alone:
// each child the parent controls, being deleted or not; for a rolling
// child resource, the ControllerRevision that lists it and whether that is
// the latest (the one recording the parent's fields now); and the
// parent's Updated condition. The integration test TestExplainRollingUpdate
// checks the same through a running controller.
func TestExplainDependentsOfARollingParent(t *testing.T) {
	parent := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
	parent.SetUID("parent-uid")
	parent.Object["spec"] = map[string]any{"template": map[string]any{"version": "2"}}
	parent.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": ConditionUpdated, "status": "False", "reason": ReasonRolloutProgressing, "message": "updating ConfigMap b"}}}
	owned := func(obj *unstructured.Unstructured, uid string) *unstructured.Unstructured {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "test.metactl.io/v1", Kind: "Thing", Name: "p", UID: types.UID(uid), Controller: new(true)}})
		return obj
	}
	revision := func(name, version string, names ...any) *unstructured.Unstructured {
		obj := owned(inmemory.Object(v1alpha1.ControllerRevisionResource.GroupVersion().String(), "ControllerRevision", "ns", name, nil, nil), "parent-uid")
		obj.Object["parentPatch"] = map[string]any{"spec": map[string]any{"template": map[string]any{"version": version}}}
		obj.Object["children"] = []any{map[string]any{"apiGroup": "", "kind": "ConfigMap", "names": names}}
		return obj
	}
	deleting := owned(inmemory.Object("v1", "ConfigMap", "ns", "c", nil, nil), "parent-uid")
	deleting.SetDeletionTimestamp(new(metav1.Now()))
	deleting.SetFinalizers([]string{"example.com/keep"})
	c := ruleController(t, ruleThings, "RollingInPlace", func(spec map[string]any) {
		spec["parentResource"].(map[string]any)["revisionHistory"] = map[string]any{"fieldPaths": []any{"spec.template"}}
		spec["childResources"] = append(spec["childResources"].([]any), map[string]any{"apiVersion": "v1", "resource": "secrets"})
	},
		owned(inmemory.Object("v1", "ConfigMap", "ns", "a", nil, nil), "parent-uid"),
		owned(inmemory.Object("v1", "ConfigMap", "ns", "b", nil, nil), "parent-uid"),
		deleting,
		owned(inmemory.Object("v1", "ConfigMap", "ns", "theirs", nil, nil), "other-uid"),
		owned(inmemory.Object("v1", "Secret", "ns", "s", nil, nil), "parent-uid"))
	c.revisions = inmemory.Informer(t, v1alpha1.ControllerRevisionResource,
		revision("rev-1", "1", "b", "c"), revision("rev-2", "2", "a"))

	deps, rollout := c.ExplainDependents(parent)
	got := map[string]string{}
	for _, d := range deps {
		got[d.Resource+" "+d.Name] = fmt.Sprintf("%s %s latest=%v", d.State, d.Revision, d.Latest)
	}
	want := map[string]string{
		"configmaps a": explain.DependentPresent + " rev-2 latest=true",
		"configmaps b": explain.DependentPresent + " rev-1 latest=false",
		"configmaps c": explain.DependentDeleting + " rev-1 latest=false",
		"secrets s":    explain.DependentPresent + "  latest=false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("dependents\n%v\nwant\n%v", got, want)
	}
	if rollout == nil || *rollout != (explain.Rollout{Status: "False", Reason: ReasonRolloutProgressing, Message: "updating ConfigMap b"}) {
		t.Errorf("rollout %+v, want the parent's Updated condition", rollout)
	}
}
