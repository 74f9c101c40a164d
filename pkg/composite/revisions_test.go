package composite

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestParentRevisions: which cached ControllerRevisions are a parent's
// (parentRevisions, claimRevisions) and in what order: those it controls
// (even unlabelled, unlike children: metacontroller loses those it
// releases), and the orphans of its namespace labelled for its selector
// and its resource, which it adopts unless it is being deleted; the one
// that records the parent's fields as they are now is the latest (first;
// new, named by its fields, if none does), the others oldest first, and a
// second one recording the latest's fields is returned apart.
func TestParentRevisions(t *testing.T) {
	const parentUID = "parent-uid"
	at := func(minute int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)) }
	ourLabels := map[string]string{"app": "p", RevisionLabelAPIGroup: "test.metactl.io", RevisionLabelResource: "things"}
	revision := func(namespace, name string, l map[string]string, owned bool, created metav1.Time, version string) *unstructured.Unstructured {
		obj := inmemory.Object(v1alpha1.ControllerRevisionResource.GroupVersion().String(), "ControllerRevision", namespace, name, l, nil)
		obj.SetCreationTimestamp(created)
		obj.Object["parentPatch"] = map[string]any{"spec": map[string]any{"template": map[string]any{"version": version}}}
		if owned {
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "test.metactl.io/v1", Kind: "Thing", Name: "p", UID: parentUID, Controller: new(true)}})
		}
		return obj
	}
	otherResource := map[string]string{"app": "p", RevisionLabelAPIGroup: "test.metactl.io", RevisionLabelResource: "otherthings"}
	cached := []*unstructured.Unstructured{
		revision("ns", "owned-v1", ourLabels, true, at(1), "1"),
		revision("ns", "orphan-v2", ourLabels, false, at(2), "2"),
		revision("ns", "unlabelled-v4", nil, true, at(3), "4"),
		revision("ns", "latest-v3", ourLabels, true, at(4), "3"),
		revision("ns", "duplicate-v3", ourLabels, true, at(5), "3"),
		revision("ns", "of-other-things", otherResource, false, at(0), "5"),
		revision("other", "orphan-elsewhere", ourLabels, false, at(0), "6"),
	}
	for _, tc := range []struct {
		name     string
		version  string // of the parent's spec.template
		deleting bool
		// want are the revisions' names, the latest first; "new" for a
		// latest not yet stored.
		want, duplicates, adopted []string
	}{
		{name: "the stored latest, then the others oldest first", version: "3",
			want: []string{"latest-v3", "owned-v1", "orphan-v2", "unlabelled-v4"}, duplicates: []string{"duplicate-v3"}, adopted: []string{"orphan-v2"}},
		{name: "a new latest", version: "7",
			want: []string{"new", "owned-v1", "orphan-v2", "unlabelled-v4", "latest-v3", "duplicate-v3"}, adopted: []string{"orphan-v2"}},
		{name: "a parent being deleted adopts nothing", version: "3", deleting: true,
			want: []string{"latest-v3", "owned-v1", "unlabelled-v4"}, duplicates: []string{"duplicate-v3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
			parent.SetUID(parentUID)
			parent.Object["spec"] = map[string]any{
				"selector": map[string]any{"matchLabels": map[string]any{"app": "p"}},
				"template": map[string]any{"version": tc.version},
			}
			if tc.deleting {
				parent.SetDeletionTimestamp(new(at(9)))
			}
			c := ruleController(t, ruleThings, "RollingInPlace", func(spec map[string]any) {
				spec["parentResource"].(map[string]any)["revisionHistory"] = map[string]any{"fieldPaths": []any{"spec.template"}}
			}, append([]*unstructured.Unstructured{parent}, cached...)...)
			c.revisions = inmemory.Informer(t, v1alpha1.ControllerRevisionResource, cached...)

			revisions, duplicates, err := c.parentRevisions(t.Context(), parent, labels.SelectorFromSet(labels.Set{"app": "p"}))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i, rev := range revisions {
				switch {
				case i == 0 && rev.object == nil:
					got = append(got, "new")
					if rev.name == "" {
						t.Error("the new latest revision has no name")
					}
				default:
					got = append(got, rev.name)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("revisions %v, want %v", got, tc.want)
			}
			var dups []string
			for _, obj := range duplicates {
				dups = append(dups, obj.GetName())
			}
			if !slices.Equal(dups, tc.duplicates) {
				t.Errorf("duplicates %v, want %v", dups, tc.duplicates)
			}
			var adopted []string
			for _, obj := range cached {
				stored, err := c.opts.Client.Resource(v1alpha1.ControllerRevisionResource).Namespace(obj.GetNamespace()).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !controlledByUID(obj, parentUID) && controlledByUID(stored, parentUID) {
					adopted = append(adopted, obj.GetName())
				}
			}
			if !slices.Equal(adopted, tc.adopted) {
				t.Errorf("adopted %v, want %v", adopted, tc.adopted)
			}
		})
	}
}

// TestWriteRevisions: the ControllerRevision writes of a rolling step
// (writeRevisions): the revisions gone are deleted, a latest not yet
// stored is created (labelled for the parent's selector and resource, the
// parent its controller), a stored revision is updated only when the
// children it lists changed (and loses its children field when it lists
// none), and one listing the same children is not written.
func TestWriteRevisions(t *testing.T) {
	parent := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
	parent.Object["spec"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "p"}}}
	group := func(names ...string) []v1alpha1.ControllerRevisionChildren {
		return []v1alpha1.ControllerRevisionChildren{{Kind: "ConfigMap", Names: names}}
	}
	stored := func(name string, children []v1alpha1.ControllerRevisionChildren) *unstructured.Unstructured {
		obj := inmemory.Object(v1alpha1.ControllerRevisionResource.GroupVersion().String(), "ControllerRevision", "ns", name, nil, nil)
		obj.Object["parentPatch"] = map[string]any{"spec": map[string]any{}}
		obj.Object["children"] = childrenField(children)
		return obj
	}
	same, changed, emptied, gone := stored("same", group("a")), stored("changed", group("b")), stored("emptied", group("c")), stored("gone", group("d"))
	c := ruleController(t, ruleThings, "RollingInPlace", nil, parent, same, changed, emptied, gone)
	client := c.opts.Client.(*dynamicfake.FakeDynamicClient)
	client.ClearActions()

	live := []*revision{
		{name: "new", patch: map[string]any{"spec": map[string]any{"v": "2"}}, children: group("e")},
		{name: "same", object: same, children: group("a")},
		{name: "changed", object: changed, children: group("b", "f")},
		{name: "emptied", object: emptied},
	}
	wrote, err := c.writeRevisions(t.Context(), parent, labels.SelectorFromSet(labels.Set{"app": "p"}), live, []*unstructured.Unstructured{gone})
	if err != nil || !wrote {
		t.Fatalf("writeRevisions: %v, %v; want it to have written", wrote, err)
	}
	var writes []string
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			name := ""
			switch a := a.(type) {
			case k8stesting.DeleteAction:
				name = a.GetName()
			case k8stesting.CreateAction: // and UpdateAction, the same methods
				name = a.GetObject().(*unstructured.Unstructured).GetName()
			}
			writes = append(writes, a.GetVerb()+" "+name)
		}
	}
	if want := []string{"delete gone", "create new", "update changed", "update emptied"}; !slices.Equal(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
	revisions := c.opts.Client.Resource(v1alpha1.ControllerRevisionResource).Namespace("ns")
	created, err := revisions.Get(t.Context(), "new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := created.GetLabels(); l["app"] != "p" || l[RevisionLabelAPIGroup] != "test.metactl.io" || l[RevisionLabelResource] != "things" {
		t.Errorf("the new revision's labels %v: want app=p and the parent resource's", l)
	}
	if !controlledByUID(created, parent.GetUID()) {
		t.Errorf("the new revision's owners %v: want the parent", created.GetOwnerReferences())
	}
	for name, want := range map[string]string{"new": "[e]", "changed": "[b f]", "emptied": "none"} {
		obj, err := revisions.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, groups, err := decodeRevision(obj)
		got := "none"
		if len(groups) > 0 {
			got = fmt.Sprint(groups[0].Names)
		}
		if err != nil || got != want {
			t.Errorf("%s lists %s (%v), want %s", name, got, err, want)
		}
	}
}
