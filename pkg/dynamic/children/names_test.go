//go:build integration

package children_test

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// TestCheckNameAgreesWithTheAPIServer: for each name, CheckName refuses
// it exactly when the API server refuses to create (dry run) an object of
// that resource with it.
func TestCheckNameAgreesWithTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resources := discovery.NewResourceMap(env.Kube.Discovery(), discovery.Options{})
	ns := env.CreateNamespace(t)
	objects := map[string]map[string]any{
		"configmaps":   {"apiVersion": "v1", "kind": "ConfigMap"},
		"services":     {"apiVersion": "v1", "kind": "Service", "spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}},
		"clusterroles": {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"},
		"namespaces":   {"apiVersion": "v1", "kind": "Namespace"},
	}
	for resource, base := range objects {
		apiVersion := base["apiVersion"].(string)
		res, err := resources.Get(ctx, apiVersion, resource)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"good", "a.b", "Bad_Name!", "app:reader", "1abc", "UPPER"} {
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			for k, v := range base {
				obj.Object[k] = v
			}
			obj.SetName(name)
			client := env.Dynamic.Resource(res.GroupVersionResource())
			var ri interface {
				Create(context.Context, *unstructured.Unstructured, metav1.CreateOptions, ...string) (*unstructured.Unstructured, error)
			} = client
			if res.Namespaced {
				ri = client.Namespace(ns)
			}
			_, serverErr := ri.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if serverErr != nil && !apierrors.IsInvalid(serverErr) {
				t.Fatalf("%s %q: %v", resource, name, serverErr)
			}
			checkErr := children.CheckName(&children.Resource{Resource: res}, name)
			if (serverErr != nil) != (checkErr != nil) {
				t.Errorf("%s %q: the API server says %v, CheckName %v", resource, name, serverErr, checkErr)
			}
		}
	}
}

// TestManageRefusesAnInvalidName: Manage does not send the create of a
// child whose name the API server would refuse, fails with a NameError
// saying why, and still writes the other children.
func TestManageRefusesAnInvalidName(t *testing.T) {
	f := newManageFixture(t, v1alpha1.ChildUpdateInPlace)
	var writes []string
	f.writer.OnWrite = func(_ context.Context, verb, _, object string, _ error) { writes = append(writes, verb+" "+object) }
	_, err := f.writer.Manage(f.ctx, f.parent, []*children.Resource{f.res}, f.set(), f.set(f.want("Bad_Name!", "1"), f.want("good", "1")))
	var ne *children.NameError
	if !errors.As(err, &ne) || ne.Name != "Bad_Name!" {
		t.Fatalf("Manage: %v, want a NameError for Bad_Name!", err)
	}
	if f.get("good") == nil {
		t.Error("the valid child was not created")
	}
	if len(writes) != 1 {
		t.Errorf("writes %v, want only the valid child's create", writes)
	}
}
