package composite

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks"
)

// TestRollOutMovesOneChildAtATime: who moves to the latest revision next
// is decided without the API server: the first child of the latest answer
// not on it, and only once every child on it is updated; the others keep
// their revision.
func TestRollOutMovesOneChildAtATime(t *testing.T) {
	res := &children.Resource{Resource: &discovery.Resource{APIVersion: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
		Method: v1alpha1.ChildUpdateRollingInPlace}
	c := &Controller{cc: &v1alpha1.CompositeController{}, children: children.NewDeclared([]*children.Resource{res})}
	parent := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "p"}}}
	cm := func(name, version string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"namespace": "ns", "name": name}, "data": map[string]any{"version": version}}}
	}
	// written is a child as written for a version.
	written := func(name, version string) *unstructured.Unstructured {
		obj, _, err := apply.Apply(cm(name, "0"), cm(name, version))
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	wants := func(version string) map[*children.Resource]children.Set {
		return map[*children.Resource]children.Set{res: {"ns/a": cm("a", version), "ns/b": cm("b", version)}}
	}
	group := func(names ...string) []v1alpha1.ControllerRevisionChildren {
		return []v1alpha1.ControllerRevisionChildren{{Kind: "ConfigMap", Names: names}}
	}
	revisions := func(onLatest, onOld []string) []*revision {
		latest := &revision{name: "latest", wants: wants("2"),
			answer: &hooks.CompositeSyncResponse{Children: []*unstructured.Unstructured{cm("a", "2"), cm("b", "2")}}}
		if len(onLatest) > 0 {
			latest.children = group(onLatest...)
		}
		return []*revision{latest, {name: "old", wants: wants("1"), children: group(onOld...)}}
	}
	observed := func(a, b string) map[*children.Resource]children.Set {
		return map[*children.Resource]children.Set{res: {"ns/a": written("a", a), "ns/b": written("b", b)}}
	}

	for _, step := range []struct {
		name            string
		onLatest, onOld []string
		observed        map[*children.Resource]children.Set
		reason, message string
		ownerA, ownerB  string
		latestChildren  string
	}{
		{name: "first: a moves", onOld: []string{"a", "b"}, observed: observed("1", "1"),
			reason: ReasonRolloutProgressing, message: "updating ConfigMap a", ownerA: "latest", ownerB: "old", latestChildren: "[a]"},
		{name: "a not updated yet: b waits", onLatest: []string{"a"}, onOld: []string{"b"}, observed: observed("1", "1"),
			reason: ReasonRolloutWaiting, message: "child ConfigMap a is not updated yet", ownerA: "latest", ownerB: "old", latestChildren: "[a]"},
		{name: "a updated: b moves", onLatest: []string{"a"}, onOld: []string{"b"}, observed: observed("2", "1"),
			reason: ReasonRolloutProgressing, message: "updating ConfigMap b", ownerA: "latest", ownerB: "latest", latestChildren: "[a b]"},
		{name: "all updated", onLatest: []string{"a", "b"}, observed: observed("2", "2"),
			reason: ReasonOnLatestRevision, message: "latest ControllerRevision: latest", ownerA: "latest", ownerB: "latest", latestChildren: "[a b]"},
		{name: "an unchanged child moves at once", onOld: []string{"a", "b"}, observed: observed("2", "1"),
			reason: ReasonRolloutProgressing, message: "updating ConfigMap b", ownerA: "latest", ownerB: "latest", latestChildren: "[a b]"},
	} {
		t.Run(step.name, func(t *testing.T) {
			revs := revisions(step.onLatest, step.onOld)
			owners, cond := c.rollOut(parent, revs, step.observed)
			if cond["reason"] != step.reason || cond["message"] != step.message {
				t.Errorf("condition %v, want %s: %s", cond, step.reason, step.message)
			}
			if a, b := owners[res]["ns/a"].name, owners[res]["ns/b"].name; a != step.ownerA || b != step.ownerB {
				t.Errorf("owners a: %s, b: %s; want %s, %s", a, b, step.ownerA, step.ownerB)
			}
			var names []string
			for _, g := range revs[0].children {
				names = append(names, g.Names...)
			}
			if got := "[" + strings.Join(names, " ") + "]"; got != step.latestChildren {
				t.Errorf("the latest revision lists %s, want %s", got, step.latestChildren)
			}
		})
	}
}

// TestWithFieldsRefusesAPatchItCannotRead: withFields' error is not dead:
// a stored revision whose parentPatch holds a non-object where a field
// path goes cannot give the hook its parent.
func TestWithFieldsRefusesAPatchItCannotRead(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": "t"}}}
	if _, err := withFields(parent, map[string]any{"spec": "x"}, []string{"spec.template"}); err == nil {
		t.Error("no error for a parentPatch whose spec is a string")
	}
	out, err := withFields(parent, map[string]any{"spec": map[string]any{"template": "u"}}, []string{"spec.template"})
	if err != nil || out.Object["spec"].(map[string]any)["template"] != "u" {
		t.Errorf("withFields = %v, %v; want spec.template u", out, err)
	}
}
