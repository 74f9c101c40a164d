package composite

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
)

// TestClaimChildren: which of the cached ConfigMaps a parent claims, adopts
// and releases (claimChildren), by selector, controller reference,
// namespace and deletion, for a namespaced parent, one being deleted, a
// cluster-scoped one and one replaced under the same name since it was
// cached. The cache is a real informer over in-memory objects; adoptions
// and releases are patches to the fake client, read back.
func TestClaimChildren(t *testing.T) {
	const parentUID = "parent-uid"
	matching := map[string]string{"app": "p"}
	controlledBy := func(obj *unstructured.Unstructured, uid types.UID) *unstructured.Unstructured {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "test.metactl.io/v1", Kind: "Thing", Name: "p", UID: uid, Controller: new(true)}})
		return obj
	}
	deleting := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		obj.SetDeletionTimestamp(&metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		obj.SetFinalizers([]string{"example.com/keep"})
		return obj
	}
	cm := func(namespace, name string, l map[string]string) *unstructured.Unstructured {
		return inmemory.Object("v1", "ConfigMap", namespace, name, l, nil)
	}
	candidates := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{
			cm("ns", "orphan", matching),
			cm("ns", "unlabelled", nil),
			cm("other", "orphan", matching),
			deleting(cm("ns", "orphan-deleting", matching)),
			controlledBy(cm("ns", "child", matching), parentUID),
			controlledBy(cm("ns", "stray", map[string]string{"app": "q"}), parentUID),
			controlledBy(cm("ns", "theirs", matching), "other-uid"),
			// A reference to the parent's UID from another namespace: a
			// namespaced parent cannot own it.
			controlledBy(cm("other", "forged", matching), parentUID),
		}
	}

	for _, tc := range []struct {
		name string
		// parent is the parent as cached; stored, when set, the parent
		// the API server now has under its name.
		parent, stored *unstructured.Unstructured
		claimed        []string
		adopted        []string
		released       []string
		err            string
	}{
		{
			name:    "namespaced parent",
			parent:  inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil),
			claimed: []string{"ns/child", "ns/orphan"}, adopted: []string{"ns/orphan"}, released: []string{"ns/stray"},
		},
		{
			name:    "parent being deleted: no adoption, no release",
			parent:  deleting(inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)),
			claimed: []string{"ns/child", "ns/stray"},
		},
		{
			name:    "cluster-scoped parent: children and orphans of every namespace",
			parent:  inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "p", nil, nil),
			claimed: []string{"ns/child", "ns/orphan", "other/forged", "other/orphan"}, adopted: []string{"ns/orphan", "other/orphan"}, released: []string{"ns/stray"},
		},
		{
			name:    "parent replaced since cached: no adoption",
			parent:  inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil),
			stored:  inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil),
			claimed: []string{"ns/child"}, released: []string{"ns/stray"}, err: "was replaced",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.parent.SetUID(parentUID)
			stored := tc.stored
			if stored == nil {
				stored = tc.parent
			} else {
				stored.SetUID("new-uid")
			}
			resource := ruleThings
			if tc.parent.GetKind() == "ClusterThing" {
				resource = ruleClusterThings
			}
			before := candidates()
			c := ruleController(t, resource, "InPlace", nil, append([]*unstructured.Unstructured{stored}, before...)...)
			res := childResource(t, c)

			got, err := c.claimChildren(t.Context(), &engine.Target{Object: tc.parent}, labels.SelectorFromSet(matching))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
			var claimed []string
			for key, obj := range got[res] {
				claimed = append(claimed, key)
				if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != parentUID {
					t.Errorf("claimed %s is controlled by %v, not the parent", key, ref)
				}
			}
			slices.Sort(claimed)
			if !slices.Equal(claimed, tc.claimed) {
				t.Errorf("claimed %v, want %v", claimed, tc.claimed)
			}

			var adopted, released []string
			for _, obj := range before {
				after, err := c.opts.Client.Resource(ruleConfigMaps).Namespace(obj.GetNamespace()).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				was, is := controlledByUID(obj, parentUID), controlledByUID(after, parentUID)
				switch key := obj.GetNamespace() + "/" + obj.GetName(); {
				case !was && is:
					adopted = append(adopted, key)
				case was && !is:
					released = append(released, key)
				}
			}
			if !slices.Equal(adopted, tc.adopted) || !slices.Equal(released, tc.released) {
				t.Errorf("adopted %v and released %v, want %v and %v", adopted, released, tc.adopted, tc.released)
			}
		})
	}
}

func controlledByUID(obj *unstructured.Unstructured, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
}
