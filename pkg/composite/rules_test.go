package composite

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// The fast tests of the controller's rules (no API server) share these: a
// CompositeController built by New on an in-memory discovery, with parent
// resource things (namespaced) or clusterthings and child resource
// configmaps (secrets is served too), whose informers and API client are in memory
// (internal/inmemory, client-go's fake dynamic client).

var (
	ruleConfigMaps    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ruleThings        = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "things"}
	ruleClusterThings = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}
	rulePlainThings   = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "plainthings"}
)

// ruleController returns the Controller of a CompositeController whose
// parent resource is parent (ruleThings or ruleClusterThings), with child
// resource configmaps updated by method, then edit applied to its spec.
// Its client holds objs; the informer of each child resource holds the
// objects of its kind among them.
func ruleController(t *testing.T, parent schema.GroupVersionResource, method string, edit func(spec map[string]any), objs ...*unstructured.Unstructured) *Controller {
	t.Helper()
	cc := ruleCompositeController(parent, method, edit)
	resources := ruleResources(t)
	stored := make([]runtime.Object, len(objs))
	for i, obj := range objs {
		stored[i] = obj.DeepCopy()
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		ruleConfigMaps: "ConfigMapList", ruleThings: "ThingList", ruleClusterThings: "ClusterThingList",
		v1alpha1.ControllerRevisionResource: "ControllerRevisionList",
	}, stored...)
	c, err := New(t.Context(), cc, Options{Client: client, Resources: resources})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, res := range c.children.Resources {
		var cached []*unstructured.Unstructured
		for _, obj := range objs {
			if obj.GetAPIVersion() == res.APIVersion && obj.GetKind() == res.Kind {
				cached = append(cached, obj)
			}
		}
		res.Informer = inmemory.Informer(t, res.GroupVersionResource(), cached...)
	}
	return c
}

// childResource is the controller's only child resource.
func childResource(t *testing.T, c *Controller) *children.Resource {
	t.Helper()
	if len(c.children.Resources) != 1 {
		t.Fatalf("%d child resources, want 1", len(c.children.Resources))
	}
	return c.children.Resources[0]
}

// ruleCompositeController is the CompositeController object of
// ruleController.
func ruleCompositeController(parent schema.GroupVersionResource, method string, edit func(spec map[string]any)) *unstructured.Unstructured {
	spec := map[string]any{
		"parentResource": map[string]any{"apiVersion": parent.GroupVersion().String(), "resource": parent.Resource},
		"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": method}}},
		"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://hook.invalid/sync"}}},
	}
	if edit != nil {
		edit(spec)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "rules", "uid": "cc-uid", "generation": int64(1)},
		"spec":     spec,
	}}
}

// ruleResources is the in-memory discovery of the rule tests: configmaps,
// secrets, things (namespaced, with a status subresource), plainthings
// (namespaced, without) and clusterthings.
func ruleResources(t *testing.T) *discovery.ResourceMap {
	t.Helper()
	return inmemory.Resources(t,
		&metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "secrets", Kind: "Secret", Namespaced: true},
		}},
		&metav1.APIResourceList{GroupVersion: "test.metactl.io/v1", APIResources: []metav1.APIResource{
			{Name: "things", Kind: "Thing", Namespaced: true},
			{Name: "things/status", Kind: "Thing", Namespaced: true},
			{Name: "plainthings", Kind: "PlainThing", Namespaced: true},
			{Name: "clusterthings", Kind: "ClusterThing"},
		}},
		&metav1.APIResourceList{GroupVersion: "test.metactl.io/v2", APIResources: []metav1.APIResource{
			{Name: "plainthings", Kind: "PlainThing", Namespaced: true},
		}})
}
