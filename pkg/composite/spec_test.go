package composite

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
)

// TestNewRefusesInvalidSpecs: what New refuses of a CompositeController
// once discovery has resolved its resources, and how: an InvalidSpecError
// naming the field and the reason, or a not-found error naming the field
// and the resource; and what it accepts.
func TestNewRefusesInvalidSpecs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		parent schema.GroupVersionResource
		method string
		edit   func(spec map[string]any)
		// annotations of the CompositeController object.
		annotations map[string]string
		// invalid, notFound: the error New must return; want are in its
		// message. Neither: New accepts the spec.
		invalid, notFound bool
		want              []string
	}{
		{name: "rolling children of a cluster-scoped parent", parent: ruleClusterThings, method: "RollingRecreate",
			invalid: true, want: []string{"spec.childResources[0].updateStrategy.method", "namespaced parent"}},
		{name: "cluster-scoped children of a namespaced parent", parent: ruleThings, method: "InPlace",
			edit: func(spec map[string]any) {
				spec["childResources"] = []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"}}
			},
			invalid: true, want: []string{"spec.childResources[0]", "a namespaced parent cannot own cluster-scoped children"}},
		{name: "one resource under two versions", parent: ruleThings, method: "InPlace",
			edit: func(spec map[string]any) {
				spec["childResources"] = []any{
					map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "plainthings"},
					map[string]any{"apiVersion": "v1", "resource": "configmaps"},
					map[string]any{"apiVersion": "test.metactl.io/v2", "resource": "plainthings"},
				}
			},
			invalid: true, want: []string{"spec.childResources[2].apiVersion", "under test.metactl.io/v1 too", "delete and recreate it forever"}},
		{name: "an invalid parent label selector", parent: ruleThings, method: "InPlace",
			edit: func(spec map[string]any) {
				spec["parentResource"].(map[string]any)["labelSelector"] = map[string]any{
					"matchExpressions": []any{map[string]any{"key": "a", "operator": "Bogus"}}}
			},
			invalid: true, want: []string{"spec.parentResource.labelSelector"}},
		{name: "a child resource not served", parent: ruleThings, method: "InPlace",
			edit: func(spec map[string]any) {
				spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmap"}}
			},
			notFound: true, want: []string{"spec.childResources[0]", `"configmap"`}},
		{name: "a parent resource not served", parent: schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "thingz"}, method: "InPlace",
			notFound: true, want: []string{"spec.parentResource", `"thingz"`}},
		{name: "an absent-children annotation that is neither empty nor refuse", parent: ruleThings, method: "InPlace",
			annotations: map[string]string{engine.AbsentChildrenAnnotation: "yes"},
			invalid:     true, want: []string{engine.AbsentChildrenAnnotation, `"empty"`}},
		{name: "the absent-children annotation empty", parent: ruleThings, method: "InPlace",
			annotations: map[string]string{engine.AbsentChildrenAnnotation: engine.AbsentListEmpty}},
		{name: "rolling children of a namespaced parent", parent: ruleThings, method: "RollingInPlace"},
		{name: "namespaced children of a cluster-scoped parent", parent: ruleClusterThings, method: "InPlace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := ruleCompositeController(tc.parent, tc.method, tc.edit)
			cc.SetAnnotations(tc.annotations)
			_, err := New(t.Context(), cc, Options{Resources: ruleResources(t)})
			ruletest.CheckNew(t, err, ruletest.Refusal{Invalid: tc.invalid, NotFound: tc.notFound, Want: tc.want})
		})
	}
}

// TestChildSelector: the selector a parent's children must match: the
// generated controller-uid=<UID>, or the parent's spec.selector, which
// must exist, be a valid label selector, and require a label to be
// present (an empty selector, or one of NotIn and DoesNotExist only,
// would adopt every orphan).
func TestChildSelector(t *testing.T) {
	expression := func(key, op string, values ...any) map[string]any {
		e := map[string]any{"key": key, "operator": op}
		if values != nil {
			e["values"] = values
		}
		return e
	}
	for _, tc := range []struct {
		name     string
		generate bool
		// selector is the parent's spec.selector; nil: none.
		selector any
		// want is the selector as a string, or err in the error.
		want, err string
	}{
		{name: "generated", generate: true, want: "controller-uid=parent-uid"},
		{name: "generated, whatever the parent's selector", generate: true, selector: map[string]any{}, want: "controller-uid=parent-uid"},
		{name: "matchLabels", selector: map[string]any{"matchLabels": map[string]any{"app": "p"}}, want: "app=p"},
		{name: "In", selector: map[string]any{"matchExpressions": []any{expression("app", "In", "p", "q")}}, want: "app in (p,q)"},
		{name: "Exists and NotIn", selector: map[string]any{"matchExpressions": []any{expression("app", "Exists"), expression("tier", "NotIn", "db")}}, want: "app,tier notin (db)"},
		{name: "none", err: "has no spec.selector"},
		{name: "not a label selector", selector: map[string]any{"matchLabels": "app=p"}, err: "is not a label selector"},
		{name: "an invalid operator", selector: map[string]any{"matchExpressions": []any{expression("app", "Bogus")}}, err: "is invalid"},
		{name: "empty", selector: map[string]any{}, err: "(empty) matches objects by the absence of labels only"},
		{name: "DoesNotExist only", selector: map[string]any{"matchExpressions": []any{expression("app", "DoesNotExist")}}, err: "absence of labels only"},
		{name: "NotIn only", selector: map[string]any{"matchExpressions": []any{expression("app", "NotIn", "x")}}, err: "absence of labels only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ruleController(t, ruleThings, "InPlace", func(spec map[string]any) {
				if tc.generate {
					spec["generateSelector"] = true
				}
			})
			parent := inmemory.Object("test.metactl.io/v1", "Thing", "ns", "p", nil, nil)
			parent.SetUID("parent-uid")
			if tc.selector != nil {
				parent.Object["spec"] = map[string]any{"selector": tc.selector}
			}
			selector, err := c.childSelector(parent)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("childSelector: %v, %v; want an error containing %q", selector, err, tc.err)
				}
				return
			}
			if err != nil || selector.String() != tc.want {
				t.Fatalf("childSelector: %v, %v; want %s", selector, err, tc.want)
			}
		})
	}
}
