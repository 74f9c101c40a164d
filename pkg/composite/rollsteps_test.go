package composite

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/hooks"
)

// TestRollingSteps: with three revisions (latest, mid, old), which child
// rollOut moves to the latest revision next, and why it waits: the first
// child of the latest answer, in the answer's order, not on the latest
// revision, and only once every child the latest lists is there, updated,
// has observed its generation and passes the status checks (Ready=True).
// Children that need no update and children no revision lists go to the
// latest at once; a revision keeps a group only while the latest answer
// wants one of its names.
func TestRollingSteps(t *testing.T) {
	c := ruleController(t, ruleThings, "RollingInPlace", func(spec map[string]any) {
		child := spec["childResources"].([]any)[0].(map[string]any)
		child["updateStrategy"].(map[string]any)["statusChecks"] = map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	})
	res := childResource(t, c)
	parent := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
	cm := func(name, version string) *unstructured.Unstructured {
		obj := inmemory.Object("v1", "ConfigMap", "ns", name, nil, nil)
		obj.Object["data"] = map[string]any{"version": version}
		return obj
	}
	// child is a child as written for version, then given ready as its
	// Ready condition's status and edited by edit.
	type child struct {
		version, ready string
		edit           func(*unstructured.Unstructured)
	}
	on := func(version string) child { return child{version: version, ready: "True"} }
	observed := func(t *testing.T, byName map[string]child) map[*children.Resource]children.Set {
		set := children.Set{}
		for name, ch := range byName {
			obj, _, err := apply.Apply(cm(name, "0"), cm(name, ch.version))
			if err != nil {
				t.Fatal(err)
			}
			obj.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": ch.ready}}}
			if ch.edit != nil {
				ch.edit(obj)
			}
			set["ns/"+name] = obj
		}
		return map[*children.Resource]children.Set{res: set}
	}
	group := func(names ...string) []v1alpha1.ControllerRevisionChildren {
		if names == nil {
			return nil
		}
		return []v1alpha1.ControllerRevisionChildren{{Kind: "ConfigMap", Names: names}}
	}
	listed := func(rev *revision) string {
		var names []string
		for _, g := range rev.children {
			names = append(names, g.Names...)
		}
		return "[" + strings.Join(names, " ") + "]"
	}

	for _, tc := range []struct {
		name string
		// answer is the order of the latest answer's children (all at
		// version 3); latest, mid and old the names each revision lists.
		answer, latest, mid, old []string
		observed                 map[string]child
		reason, message          string
		// owners after the step, and what each revision lists: latest,
		// mid, old.
		owners map[string]string
		lists  [3]string
	}{
		{
			name: "the first child of the answer moves, from any revision", answer: []string{"a", "b", "c"},
			mid: []string{"b"}, old: []string{"a", "c"},
			observed: map[string]child{"a": on("1"), "b": on("2"), "c": on("1")},
			reason:   ReasonRolloutProgressing, message: "updating ConfigMap a",
			owners: map[string]string{"a": "latest", "b": "mid", "c": "old"}, lists: [3]string{"[a]", "[b]", "[c]"},
		},
		{
			name: "the answer's order decides, not the names", answer: []string{"c", "b", "a"},
			mid: []string{"b"}, old: []string{"a", "c"},
			observed: map[string]child{"a": on("1"), "b": on("2"), "c": on("1")},
			reason:   ReasonRolloutProgressing, message: "updating ConfigMap c",
			owners: map[string]string{"a": "old", "b": "mid", "c": "latest"}, lists: [3]string{"[c]", "[b]", "[a]"},
		},
		{
			name: "a child of the latest not updated yet holds the others", answer: []string{"a", "b", "c"},
			latest: []string{"a"}, mid: []string{"b"}, old: []string{"c"},
			observed: map[string]child{"a": on("2"), "b": on("2"), "c": on("1")},
			reason:   ReasonRolloutWaiting, message: "child ConfigMap a is not updated yet",
			owners: map[string]string{"a": "latest", "b": "mid", "c": "old"}, lists: [3]string{"[a]", "[b]", "[c]"},
		},
		{
			name: "a child of the latest failing its status check holds the others", answer: []string{"a", "b", "c"},
			latest: []string{"a"}, mid: []string{"b"}, old: []string{"c"},
			observed: map[string]child{"a": {version: "3", ready: "False"}, "b": on("2"), "c": on("1")},
			reason:   ReasonRolloutWaiting, message: `child ConfigMap a failed status check: "Ready" condition status is "False" (want "True")`,
			owners: map[string]string{"a": "latest", "b": "mid", "c": "old"}, lists: [3]string{"[a]", "[b]", "[c]"},
		},
		{
			name: "a child of the latest that has not observed its generation holds the others", answer: []string{"a", "b"},
			latest: []string{"a"}, old: []string{"b"},
			observed: map[string]child{"a": {version: "3", ready: "True", edit: func(obj *unstructured.Unstructured) {
				obj.SetGeneration(2)
				obj.Object["status"].(map[string]any)["observedGeneration"] = int64(1)
			}}, "b": on("1")},
			reason: ReasonRolloutWaiting, message: "child ConfigMap a with RollingInPlace update strategy hasn't observed latest spec",
			owners: map[string]string{"a": "latest", "b": "old"}, lists: [3]string{"[a]", "[]", "[b]"},
		},
		{
			name: "a missing child of the latest holds the others", answer: []string{"a", "b"},
			latest: []string{"a"}, old: []string{"b"},
			observed: map[string]child{"b": on("1")},
			reason:   ReasonRolloutWaiting, message: "missing child ConfigMap a",
			owners: map[string]string{"a": "latest", "b": "old"}, lists: [3]string{"[a]", "[]", "[b]"},
		},
		{
			name: "the latest ready: the next child moves", answer: []string{"a", "b", "c"},
			latest: []string{"a"}, mid: []string{"b"}, old: []string{"c"},
			observed: map[string]child{"a": on("3"), "b": on("2"), "c": on("1")},
			reason:   ReasonRolloutProgressing, message: "updating ConfigMap b",
			owners: map[string]string{"a": "latest", "b": "latest", "c": "old"}, lists: [3]string{"[a b]", "[]", "[c]"},
		},
		{
			name: "a child needing no update and a new one join the latest at once; the new one is waited for", answer: []string{"a", "b", "c"},
			old:      []string{"a", "b"},
			observed: map[string]child{"a": on("1"), "b": on("3")},
			reason:   ReasonRolloutWaiting, message: "missing child ConfigMap c",
			owners: map[string]string{"a": "old", "b": "latest", "c": "latest"}, lists: [3]string{"[b c]", "[]", "[a]"},
		},
		{
			// As metacontroller: a group keeps a name no longer wanted while
			// it lists one still wanted; unlike metacontroller, that name
			// does not hold the rollout as a missing child.
			name: "a name the latest lists but no longer wants stays listed and holds nothing", answer: []string{"a", "b"},
			latest: []string{"a", "gone"}, old: []string{"b"},
			observed: map[string]child{"a": on("3"), "b": on("1")},
			reason:   ReasonRolloutProgressing, message: "updating ConfigMap b",
			owners: map[string]string{"a": "latest", "b": "latest"}, lists: [3]string{"[a gone b]", "[]", "[]"},
		},
		{
			name: "a revision listing only children no longer wanted lists nothing", answer: []string{"a"},
			latest: []string{"a"}, mid: []string{"gone"},
			observed: map[string]child{"a": on("3"), "gone": on("2")},
			reason:   ReasonOnLatestRevision, message: "latest ControllerRevision: latest",
			owners: map[string]string{"a": "latest"}, lists: [3]string{"[a]", "[]", "[]"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			latest := &revision{name: "latest", children: group(tc.latest...), answer: &hooks.CompositeSyncResponse{},
				wants: map[*children.Resource]children.Set{res: {}}}
			for _, name := range tc.answer {
				latest.answer.Children = append(latest.answer.Children, cm(name, "3"))
				latest.wants[res]["ns/"+name] = cm(name, "3")
			}
			revs := []*revision{latest, {name: "mid", children: group(tc.mid...)}, {name: "old", children: group(tc.old...)}}

			owners, cond := c.rollOut(parent, revs, observed(t, tc.observed))

			if cond["reason"] != tc.reason || cond["message"] != tc.message {
				t.Errorf("condition %s: %s, want %s: %s", cond["reason"], cond["message"], tc.reason, tc.message)
			}
			got := map[string]string{}
			for key, rev := range owners[res] {
				got[strings.TrimPrefix(key, "ns/")] = rev.name
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.owners) {
				t.Errorf("owners %v, want %v", got, tc.owners)
			}
			for i, rev := range revs {
				if l := listed(rev); l != tc.lists[i] {
					t.Errorf("revision %s lists %s, want %s", rev.name, l, tc.lists[i])
				}
			}
		})
	}
}
