package decorator

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// The fast tests of the decorator's rules (no API server) build it with
// New on an in-memory discovery (internal/inmemory) that serves
// configmaps, secrets, services and clusterthings.

// ruleDecorator returns the Controller of a DecoratorController named
// "rules" with these spec.resources and spec.attachments.
func ruleDecorator(t *testing.T, resources, attachments []any) *Controller {
	t.Helper()
	c, err := newDecorator(t, resources, attachments, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// newDecorator is New of a DecoratorController named "rules" with these
// spec.resources, spec.attachments and annotations.
func newDecorator(t *testing.T, resources, attachments []any, annotations map[string]string) (*Controller, error) {
	t.Helper()
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "rules", "uid": "dc-uid", "generation": int64(1)},
		"spec": map[string]any{
			"resources":   resources,
			"attachments": attachments,
			"hooks":       map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://hook.invalid/sync"}}},
		},
	}}
	dc.SetAnnotations(annotations)
	return New(t.Context(), dc, Options{Resources: ruleServed(t)})
}

// ruleServed is the in-memory discovery of the rule tests: configmaps,
// secrets, services and clusterthings.
func ruleServed(t *testing.T) *discovery.ResourceMap {
	t.Helper()
	return inmemory.Resources(t,
		&metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "secrets", Kind: "Secret", Namespaced: true},
			{Name: "services", Kind: "Service", Namespaced: true},
		}},
		&metav1.APIResourceList{GroupVersion: "test.metactl.io/v1", APIResources: []metav1.APIResource{{Name: "clusterthings", Kind: "ClusterThing"}}},
		&metav1.APIResourceList{GroupVersion: "test.metactl.io/v2", APIResources: []metav1.APIResource{{Name: "clusterthings", Kind: "ClusterThing"}}})
}

// TestDecoratorSelects: which objects a DecoratorController selects, by
// its rules: any rule of the object's resource, whose label selector and
// annotation selector both match; annotation values are free text.
func TestDecoratorSelects(t *testing.T) {
	c := ruleDecorator(t, []any{
		map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"app": "x"}}},
		map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"annotationSelector": map[string]any{
				"matchAnnotations": map[string]any{"team": "a b"},
				"matchExpressions": []any{map[string]any{"key": "tier", "operator": "NotIn", "values": []any{"db"}}}}},
		map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"labelSelector":      map[string]any{"matchLabels": map[string]any{"env": "prod"}},
			"annotationSelector": map[string]any{"matchAnnotations": map[string]any{"owner": "me"}}},
		map[string]any{"apiVersion": "v1", "resource": "secrets",
			"labelSelector":      map[string]any{"matchExpressions": []any{map[string]any{"key": "app", "operator": "Exists"}}},
			"annotationSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "skip", "operator": "DoesNotExist"}}}},
	}, nil)
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		obj      *unstructured.Unstructured
		selected bool
	}{
		{"by label", inmemory.Object("v1", "ConfigMap", "ns", "a", l("app", "x"), nil), true},
		{"another label value", inmemory.Object("v1", "ConfigMap", "ns", "a", l("app", "y"), nil), false},
		{"by annotation, free text", inmemory.Object("v1", "ConfigMap", "ns", "a", nil, l("team", "a b")), true},
		{"annotation excluded by NotIn", inmemory.Object("v1", "ConfigMap", "ns", "a", nil, l("team", "a b", "tier", "db")), false},
		{"a label without the rule's annotation", inmemory.Object("v1", "ConfigMap", "ns", "a", l("env", "prod"), nil), false},
		{"a label and the rule's annotation", inmemory.Object("v1", "ConfigMap", "ns", "a", l("env", "prod"), l("owner", "me")), true},
		{"a rule of another resource: by label Exists", inmemory.Object("v1", "Secret", "ns", "s", l("app", "y"), nil), true},
		{"annotation excluded by DoesNotExist", inmemory.Object("v1", "Secret", "ns", "s", l("app", "y"), l("skip", "1")), false},
		{"no label", inmemory.Object("v1", "Secret", "ns", "s", nil, nil), false},
		{"a resource no rule names", inmemory.Object("v1", "Service", "ns", "svc", l("app", "x"), nil), false},
	} {
		if got := selected(c, tc.obj); got != tc.selected {
			t.Errorf("%s: selected = %v, want %v", tc.name, got, tc.selected)
		}
	}
}

// selected reports whether c selects obj: a watched resource of obj's
// kind selects it.
func selected(c *Controller, obj *unstructured.Unstructured) bool {
	for _, w := range c.watched {
		if w.GroupVersionKind() == obj.GroupVersionKind() && w.selects(obj) {
			return true
		}
	}
	return false
}

// TestObservedAttachments: which cached Secrets are a decorated object's
// attachments (observedAttachments): those it controls, in its namespace,
// that carry this DecoratorController's annotation; for a cluster-scoped
// object, those of every namespace. The cache is a real informer over
// in-memory objects.
func TestObservedAttachments(t *testing.T) {
	ours := map[string]string{AttachmentAnnotation: "rules"}
	controlledBy := func(obj *unstructured.Unstructured, owner *unstructured.Unstructured, controller bool) *unstructured.Unstructured {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: new(controller)}})
		return obj
	}
	cm := inmemory.Object("v1", "ConfigMap", "ns", "decorated", nil, nil)
	other := inmemory.Object("v1", "ConfigMap", "ns", "other", nil, nil)
	cluster := inmemory.Object("test.metactl.io/v1", "ClusterThing", "", "decorated", nil, nil)
	secret := func(namespace, name string, annotations map[string]string) *unstructured.Unstructured {
		return inmemory.Object("v1", "Secret", namespace, name, nil, annotations)
	}
	cached := []*unstructured.Unstructured{
		controlledBy(secret("ns", "ours", ours), cm, true),
		controlledBy(secret("ns", "another-decorators", map[string]string{AttachmentAnnotation: "other"}), cm, true),
		controlledBy(secret("ns", "a-child", nil), cm, true),
		controlledBy(secret("ns", "of-another-object", ours), other, true),
		controlledBy(secret("ns", "not-as-controller", ours), cm, false),
		// A reference to the object's UID from another namespace: a
		// namespaced object cannot own it.
		controlledBy(secret("elsewhere", "forged", ours), cm, true),
		controlledBy(secret("a", "of-the-cluster-thing", ours), cluster, true),
		controlledBy(secret("b", "of-the-cluster-thing", ours), cluster, true),
	}
	c := ruleDecorator(t, []any{
		map[string]any{"apiVersion": "v1", "resource": "configmaps"},
		map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
	}, []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}})
	for _, res := range c.attachments.Resources {
		res.Informer = inmemory.Informer(t, schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, cached...)
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want []string
	}{
		{cm, []string{"ns/ours"}},
		{other, []string{"ns/of-another-object"}},
		{cluster, []string{"a/of-the-cluster-thing", "b/of-the-cluster-thing"}},
	} {
		var got []string
		observed, err := c.observedAttachments(t.Context(), &engine.Target{Object: tc.obj})
		if err != nil {
			t.Fatal(err)
		}
		for _, set := range observed {
			for key := range set {
				got = append(got, key)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("attachments of %s %s: %v, want %v", tc.obj.GetKind(), tc.obj.GetName(), got, tc.want)
		}
	}
}

// TestDecoratorNewRefusesInvalidSpecs: what New refuses of a
// DecoratorController once discovery has resolved its resources, and
// how: an InvalidSpecError naming the field for an invalid selector or
// absent-attachments annotation, a not-found error naming the field for a
// resource not served; and what it accepts.
func TestDecoratorNewRefusesInvalidSpecs(t *testing.T) {
	configMaps := map[string]any{"apiVersion": "v1", "resource": "configmaps"}
	secrets := []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}
	for _, tc := range []struct {
		name                   string
		resources, attachments []any
		annotations            map[string]string
		invalid, notFound      bool
		want                   []string
	}{
		{name: "an invalid label selector", resources: []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Bogus"}}}}},
			invalid: true, want: []string{"spec.resources[0]", "labelSelector"}},
		{name: "a resource not served", resources: []any{configMaps, map[string]any{"apiVersion": "v1", "resource": "configmap"}},
			notFound: true, want: []string{"spec.resources[1]", `"configmap"`}},
		{name: "an attachment resource not served", resources: []any{configMaps}, attachments: []any{map[string]any{"apiVersion": "v1", "resource": "secret"}},
			notFound: true, want: []string{"spec.attachments[0]", `"secret"`}},
		{name: "an absent-attachments annotation that is neither empty nor refuse", resources: []any{configMaps}, attachments: secrets,
			annotations: map[string]string{engine.AbsentAttachmentsAnnotation: "yes"}, invalid: true, want: []string{engine.AbsentAttachmentsAnnotation}},
		{name: "two rules of one resource", resources: []any{configMaps, configMaps}, attachments: secrets},
		{name: "an attachment resource under two versions", resources: []any{configMaps}, attachments: []any{
			map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
			map[string]any{"apiVersion": "test.metactl.io/v2", "resource": "clusterthings"},
		}, invalid: true, want: []string{"spec.attachments[1].apiVersion", "under test.metactl.io/v1 too"}},
		{name: "no attachments", resources: []any{configMaps}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newDecorator(t, tc.resources, tc.attachments, tc.annotations)
			ruletest.CheckNew(t, err, ruletest.Refusal{Invalid: tc.invalid, NotFound: tc.notFound, Want: tc.want})
		})
	}
}

// TestIgnoreStatusChangesNeedsEveryRule: a resource's status-only changes
// are ignored only when every rule of that resource sets
// ignoreStatusChanges (an object a rule selects that wants status changes
// must get them); each resource is decided by its own rules.
func TestIgnoreStatusChangesNeedsEveryRule(t *testing.T) {
	rule := func(resource string, ignore any) map[string]any {
		r := map[string]any{"apiVersion": "v1", "resource": resource}
		if ignore != nil {
			r["ignoreStatusChanges"] = ignore
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		rules []any
		want  map[string]bool // by resource
	}{
		{name: "one rule that ignores", rules: []any{rule("configmaps", true)}, want: map[string]bool{"configmaps": true}},
		{name: "one rule that does not say", rules: []any{rule("configmaps", nil)}, want: map[string]bool{"configmaps": false}},
		{name: "every rule ignores", rules: []any{rule("configmaps", true), rule("configmaps", true)}, want: map[string]bool{"configmaps": true}},
		{name: "one of two rules ignores", rules: []any{rule("configmaps", true), rule("configmaps", nil)}, want: map[string]bool{"configmaps": false}},
		{name: "the other of two rules ignores", rules: []any{rule("configmaps", false), rule("configmaps", true)}, want: map[string]bool{"configmaps": false}},
		{name: "each resource by its own rules", rules: []any{rule("configmaps", true), rule("secrets", nil)},
			want: map[string]bool{"configmaps": true, "secrets": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ruleDecorator(t, tc.rules, nil)
			got := map[string]bool{}
			for _, w := range c.watched {
				got[w.Name] = w.IgnoreStatusChanges
			}
			if len(got) != len(tc.want) {
				t.Fatalf("watched resources %v, want %v", got, tc.want)
			}
			for res, want := range tc.want {
				if got[res] != want {
					t.Errorf("%s: IgnoreStatusChanges = %v, want %v", res, got[res], want)
				}
			}
		})
	}
}
