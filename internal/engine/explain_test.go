package engine

import (
	"slices"
	"testing"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
)

// TestGoneDependents: a child the newest sync created or updated that is
// not among those present is listed as gone; one present (both named by
// trigger.ObjectName), deleted, or whose write failed is not.
func TestGoneDependents(t *testing.T) {
	syncs := []*history.Sync{{Writes: []history.Write{
		{Verb: "create", Target: "child", Object: "configmaps/ns/gone"},
		{Verb: "update", Target: "child", Object: "configmaps/ns/here"},
		{Verb: "patch", Target: "child", Object: "deployments.apps/ns/web"},
		{Verb: "delete", Target: "child", Object: "configmaps/ns/deleted"},
		{Verb: "create", Target: "child", Object: "configmaps/ns/failed", Error: "forbidden"},
		{Verb: "patch", Target: "status", Object: "things.test.metactl.io/ns/p"},
		{Verb: "create", Target: "child", Object: "clusterthings.test.metactl.io/c"},
	}}, {Writes: []history.Write{{Verb: "create", Target: "child", Object: "configmaps/ns/older"}}}}
	present := []explain.Dependent{
		{Resource: "configmaps", Namespace: "ns", Name: "here"},
		{Resource: "deployments.apps", Namespace: "ns", Name: "web"},
	}
	got := goneDependents(syncs, present)
	want := []explain.Dependent{
		{Resource: "configmaps", Namespace: "ns", Name: "gone", State: explain.DependentGone},
		{Resource: "clusterthings.test.metactl.io", Name: "c", State: explain.DependentGone},
	}
	if !slices.Equal(got, want) {
		t.Errorf("gone dependents %+v, want %+v", got, want)
	}
}
