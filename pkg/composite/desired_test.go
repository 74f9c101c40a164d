package composite

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/pkg/hooks"
)

// TestDesiredChildren: the check of a sync hook's children, as a sync
// makes it (Offline, then Desired), for a CompositeController with child
// resources configmaps and secrets: names, namespaces, kinds, duplicates,
// and the labels a child needs to match the parent's selector (or gets,
// with generateSelector). Children that pass come back complete: the
// parent's namespace and controller reference.
func TestDesiredChildren(t *testing.T) {
	child := func(kind, namespace, name string, labels map[string]string) *unstructured.Unstructured {
		obj := inmemory.Object("v1", kind, namespace, name, labels, nil)
		obj.SetUID("")
		obj.SetResourceVersion("")
		return obj
	}
	matching := map[string]string{"app": "p"}
	for _, tc := range []struct {
		name     string
		generate bool
		children []*unstructured.Unstructured
		// want are the desired children, as "Kind namespace/name labels",
		// sorted; err, when set, is in the refusal.
		want []string
		err  string
	}{
		{name: "a matching child gets the parent's namespace", children: []*unstructured.Unstructured{child("ConfigMap", "", "a", matching)},
			want: []string{"ConfigMap ns/a app=p"}},
		{name: "one name in two kinds", children: []*unstructured.Unstructured{child("ConfigMap", "ns", "a", matching), child("Secret", "", "a", matching)},
			want: []string{"ConfigMap ns/a app=p", "Secret ns/a app=p"}},
		{name: "generateSelector labels the child", generate: true, children: []*unstructured.Unstructured{child("ConfigMap", "", "a", nil)},
			want: []string{"ConfigMap ns/a controller-uid=parent-uid"}},
		{name: "labels that do not match the parent's selector", children: []*unstructured.Unstructured{child("ConfigMap", "", "a", map[string]string{"app": "q"})},
			err: "do not match the parent's selector"},
		{name: "no labels", children: []*unstructured.Unstructured{child("ConfigMap", "", "a", nil)},
			err: "do not match the parent's selector"},
		{name: "a kind that is not a child resource", children: []*unstructured.Unstructured{child("Service", "", "a", matching)},
			err: "not a declared resource"},
		{name: "another namespace", children: []*unstructured.Unstructured{child("ConfigMap", "other", "a", matching)},
			err: "differs from the owner's namespace"},
		{name: "a duplicate", children: []*unstructured.Unstructured{child("ConfigMap", "", "a", matching), child("ConfigMap", "ns", "a", matching)},
			err: "duplicate"},
		{name: "a name with a slash", children: []*unstructured.Unstructured{child("ConfigMap", "", "a/b", matching)},
			err: "invalid metadata.name"},
		{name: "no name", children: []*unstructured.Unstructured{child("ConfigMap", "", "", matching)},
			err: "metadata.name is required"},
		{name: "one bad child refuses the whole answer", children: []*unstructured.Unstructured{child("ConfigMap", "", "a", matching), child("Secret", "", "b", nil)},
			err: "do not match the parent's selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ruleController(t, ruleThings, "InPlace", func(spec map[string]any) {
				spec["childResources"] = append(spec["childResources"].([]any), map[string]any{"apiVersion": "v1", "resource": "secrets"})
				if tc.generate {
					spec["generateSelector"] = true
				}
			})
			parent := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
			parent.SetUID("parent-uid")
			if !tc.generate {
				parent.Object["spec"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "p"}}}
			}
			sync, err := c.Offline(parent)
			if err != nil {
				t.Fatalf("Offline: %v", err)
			}
			var got []string
			for key, obj := range ruletest.Desired(t, sync, &hooks.CompositeSyncResponse{Children: tc.children}, tc.err) {
				got = append(got, key+" "+labelsOf(obj))
				if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != "parent-uid" || ref.Kind != "Thing" {
					t.Errorf("%s has controller %v, want the parent", key, ref)
				}
			}
			if tc.err != "" {
				return
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("desired %q, want %q", got, tc.want)
			}
		})
	}
}

func labelsOf(obj *unstructured.Unstructured) string {
	var out []string
	for k, v := range obj.GetLabels() {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
