package composite

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
)

// TestOrphanEventsConcernTheParentsThatMayAdoptThem: which cached parents
// an orphan's event queues (candidateParents): those of its namespace
// whose spec.selector matches it, of every namespace for cluster-scoped
// parents, none whose selector is missing or invalid; with
// generateSelector, the one parent whose UID its controller-uid label
// names.
func TestOrphanEventsConcernTheParentsThatMayAdoptThem(t *testing.T) {
	parent := func(resource schema.GroupVersionResource, namespace, name string, selector any) *unstructured.Unstructured {
		kind := map[string]string{"things": "Thing", "clusterthings": "ClusterThing"}[resource.Resource]
		obj := inmemory.Object(resource.GroupVersion().String(), kind, namespace, name, nil, nil)
		if selector != nil {
			obj.Object["spec"] = map[string]any{"selector": selector}
		}
		return obj
	}
	byLabel := func(value string) any { return map[string]any{"matchLabels": map[string]any{"app": value}} }
	things := []*unstructured.Unstructured{
		parent(ruleThings, "a", "x", byLabel("x")),
		parent(ruleThings, "a", "x-too", map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "In", "values": []any{"x", "z"}}}}),
		parent(ruleThings, "a", "y", byLabel("y")),
		parent(ruleThings, "a", "no-selector", nil),
		parent(ruleThings, "a", "by-absence", map[string]any{}),
		parent(ruleThings, "b", "x", byLabel("x")),
	}
	clusterThings := []*unstructured.Unstructured{parent(ruleClusterThings, "", "x", byLabel("x")), parent(ruleClusterThings, "", "y", byLabel("y"))}

	for _, tc := range []struct {
		name     string
		resource schema.GroupVersionResource
		generate bool
		orphan   *unstructured.Unstructured
		want     []string
	}{
		{"the matching parents of its namespace", ruleThings, false,
			inmemory.Object("v1", "ConfigMap", "a", "o", map[string]string{"app": "x"}, nil), []string{"a/x", "a/x-too"}},
		{"no parent matches", ruleThings, false,
			inmemory.Object("v1", "ConfigMap", "a", "o", map[string]string{"app": "w"}, nil), nil},
		{"no labels", ruleThings, false,
			inmemory.Object("v1", "ConfigMap", "a", "o", nil, nil), nil},
		{"another namespace's parents", ruleThings, false,
			inmemory.Object("v1", "ConfigMap", "b", "o", map[string]string{"app": "x"}, nil), []string{"b/x"}},
		{"cluster-scoped parents, from any namespace", ruleClusterThings, false,
			inmemory.Object("v1", "ConfigMap", "c", "o", map[string]string{"app": "x"}, nil), []string{"x"}},
		{"generateSelector: the parent its label names", ruleThings, true,
			inmemory.Object("v1", "ConfigMap", "a", "o", map[string]string{ControllerUIDLabel: "uid-a/y"}, nil), []string{"a/y"}},
		{"generateSelector: a parent of another namespace", ruleThings, true,
			inmemory.Object("v1", "ConfigMap", "b", "o", map[string]string{ControllerUIDLabel: "uid-a/y"}, nil), nil},
		{"generateSelector: no label", ruleThings, true,
			inmemory.Object("v1", "ConfigMap", "a", "o", map[string]string{"app": "x"}, nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ruleController(t, tc.resource, "InPlace", func(spec map[string]any) {
				if tc.generate {
					spec["generateSelector"] = true
				}
			})
			cached := things
			if tc.resource == ruleClusterThings {
				cached = clusterThings
			}
			c.parents.Informer = inmemory.Informer(t, tc.resource, cached...)
			got := keyStrings(c.candidateParents(tc.orphan))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("parents %q, want %q", got, tc.want)
			}
		})
	}
}

// TestChildEventsConcernTheirParent: which parent a child's event queues
// (ownerKeys, by its controller reference): the parent of the reference's
// name, if the reference is to the parent kind in any version of its
// group, in the child's namespace (none for a cluster-scoped parent).
func TestChildEventsConcernTheirParent(t *testing.T) {
	child := inmemory.Object("v1", "ConfigMap", "ns", "c", nil, nil)
	for _, tc := range []struct {
		name     string
		resource schema.GroupVersionResource
		ref      metav1.OwnerReference
		want     []string
	}{
		{"a Thing", ruleThings, metav1.OwnerReference{APIVersion: "test.metactl.io/v1", Kind: "Thing", Name: "p"}, []string{"ns/p"}},
		{"a Thing of another version", ruleThings, metav1.OwnerReference{APIVersion: "test.metactl.io/v2", Kind: "Thing", Name: "p"}, []string{"ns/p"}},
		{"a ClusterThing", ruleClusterThings, metav1.OwnerReference{APIVersion: "test.metactl.io/v1", Kind: "ClusterThing", Name: "p"}, []string{"p"}},
		{"another kind", ruleThings, metav1.OwnerReference{APIVersion: "test.metactl.io/v1", Kind: "Other", Name: "p"}, nil},
		{"the kind in another group", ruleThings, metav1.OwnerReference{APIVersion: "other.io/v1", Kind: "Thing", Name: "p"}, nil},
		{"an unreadable apiVersion", ruleThings, metav1.OwnerReference{APIVersion: "a/b/c", Kind: "Thing", Name: "p"}, nil},
	} {
		c := ruleController(t, tc.resource, "InPlace", nil)
		if got := keyStrings(c.ownerKeys(child, &tc.ref)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys %q, want %q", tc.name, got, tc.want)
		}
	}
}

// keyStrings returns keys as the work queue's log and the sync history
// show them.
func keyStrings(keys []engine.Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.String())
	}
	return out
}
