//go:build integration

package decorator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/decorator"
)

func explainConfigMap(c *decorator.Controller, ns, name string) *explain.Answer {
	a := &explain.Answer{Object: explain.Request{Version: "v1", Resource: "configmaps", Namespace: ns, Name: name}}
	c.Explain(a)
	return a
}

// TestExplain: a DecoratorController explains a decorated object (role
// decorated object, its attachments: only those carrying its annotation),
// and, for an object of its resource it does not select, its rules.
func TestExplain(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		return map[string]any{"attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": req.Object.GetName() + "-secret"},
			"stringData": map[string]any{"of": req.Object.GetName()},
		}}}
	})
	c := start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
		syncHook(h))
	// target is created unselected, then given a Secret it controls
	// without the decorator's annotation (another decorator's, say), which
	// is not this controller's attachment, then selected: its attachment
	// is created after that Secret, so the cache that holds the one holds
	// the other.
	target := createConfigMap(t, ns, "target", nil, nil)
	createConfigMap(t, ns, "bystander", nil, nil)
	foreign := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "foreign", "namespace": ns, "ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "name": "target", "uid": string(target.GetUID()), "controller": true}}}}}
	if _, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Create(ctx(t), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"decorate":"` + testName(t) + `"}}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, secretsGVR, ns, "target-secret", "attached", func(o *unstructured.Unstructured) bool { return o != nil })

	testenv.Eventually(t, 30*time.Second, "explain lists the attachment", func(context.Context) (bool, error) {
		a := explainConfigMap(c, ns, "target")
		if len(a.Controllers) != 1 {
			return false, nil
		}
		got := a.Controllers[0]
		if got.Kind != "DecoratorController" || got.Name != testName(t) || got.Role != explain.RoleDecorated {
			t.Fatalf("explain: %+v, want the decorated object of DecoratorController %s", got, testName(t))
		}
		return len(got.Dependents) == 1 && got.Dependents[0] == explain.Dependent{Resource: "secrets", Namespace: ns, Name: "target-secret", State: explain.DependentPresent}, nil
	})
	testenv.Eventually(t, 30*time.Second, "explain says the bystander is not selected", func(context.Context) (bool, error) {
		a := explainConfigMap(c, ns, "bystander")
		return len(a.Controllers) == 0 && len(a.NotSelected) == 1 &&
			strings.Contains(a.NotSelected[0].Selector, "labels decorate="+testName(t)), nil
	})
}
