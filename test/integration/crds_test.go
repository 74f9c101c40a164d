package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var env *testenv.Environment

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

func readManifest(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "pkg", "apis", "metacontroller", "v1alpha1", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	return obj
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestKubectlAppliesCRDs(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(ctx(t), "apply", "-f", filepath.Join(root, "manifests", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range []string{"compositecontrollers", "decoratorcontrollers", "controllerrevisions"} {
		if !strings.Contains(out, crd+".metacontroller.k8s.io") {
			t.Errorf("kubectl apply did not mention %s:\n%s", crd, out)
		}
	}
	// The API server serves them with the names and scope of the contract.
	resources, err := env.Kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	type served struct {
		Kind       string
		Namespaced bool
		ShortNames []string
	}
	got := map[string]served{}
	for _, r := range resources.APIResources {
		if !strings.Contains(r.Name, "/") {
			got[r.Name] = served{r.Kind, r.Namespaced, r.ShortNames}
		}
	}
	want := map[string]served{
		"compositecontrollers": {"CompositeController", false, []string{"cc", "cctl"}},
		"decoratorcontrollers": {"DecoratorController", false, []string{"dec", "decorators"}},
		"controllerrevisions":  {"ControllerRevision", true, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("served resources (-want +got):\n%s", diff)
	}
}

// TestValidObjectsKeepEveryField creates the manifests that use every field
// and reads them back: the schema must neither reject nor prune any of them.
func TestValidObjectsKeepEveryField(t *testing.T) {
	ns := env.CreateNamespace(t)
	for _, tc := range []struct {
		file      string
		resource  schema.GroupVersionResource
		namespace string
		field     string
	}{
		{"compositecontroller-full.yaml", v1alpha1.CompositeControllerResource, "", "spec"},
		{"decoratorcontroller-full.yaml", v1alpha1.DecoratorControllerResource, "", "spec"},
		{"controllerrevision-full.yaml", v1alpha1.ControllerRevisionResource, ns, "parentPatch"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			obj := readManifest(t, tc.file)
			obj.SetNamespace(tc.namespace)
			client := env.Dynamic.Resource(tc.resource).Namespace(tc.namespace)
			created, err := client.Create(ctx(t), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
			if err != nil {
				t.Fatalf("a valid object was rejected: %v", err)
			}
			t.Cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
			for _, f := range []string{tc.field, "children"} {
				if diff := cmp.Diff(obj.Object[f], created.Object[f]); diff != "" {
					t.Errorf("the server changed %s (-sent +stored):\n%s", f, diff)
				}
			}
		})
	}
}

// TestInvalidObjectsAreRejectedByTheServer covers what metacontroller's
// CRDs refuse too; what they accept, metactl's do as well, and reports it
// as InvalidSpec when it cannot run (see pkg/apis/metacontroller/v1alpha1).
func TestInvalidObjectsAreRejectedByTheServer(t *testing.T) {
	set := func(obj *unstructured.Unstructured, value any, path ...string) {
		if err := unstructured.SetNestedField(obj.Object, value, path...); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name     string
		file     string
		resource schema.GroupVersionResource
		mutate   func(obj *unstructured.Unstructured)
		want     string
	}{
		{"update method Sideways", "compositecontrollers", v1alpha1.CompositeControllerResource, func(o *unstructured.Unstructured) {
			set(o, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "Sideways"}}}, "spec", "childResources")
		}, "Unsupported value"},
		{"no parent resource", "compositecontrollers", v1alpha1.CompositeControllerResource, func(o *unstructured.Unstructured) {
			unstructured.RemoveNestedField(o.Object, "spec", "parentResource", "resource")
		}, "spec.parentResource.resource: Required value"},
		{"attachment method Sideways", "decoratorcontrollers", v1alpha1.DecoratorControllerResource, func(o *unstructured.Unstructured) {
			set(o, []any{map[string]any{"apiVersion": "v1", "resource": "services", "updateStrategy": map[string]any{"method": "Sideways"}}}, "spec", "attachments")
		}, "Unsupported value"},
		{"hook version v3", "compositecontrollers", v1alpha1.CompositeControllerResource, func(o *unstructured.Unstructured) {
			set(o, "v3", "spec", "hooks", "sync", "version")
		}, "Unsupported value"},
		{"response mode", "compositecontrollers", v1alpha1.CompositeControllerResource, func(o *unstructured.Unstructured) {
			set(o, "lenient", "spec", "hooks", "sync", "webhook", "responseUnMarshallMode")
		}, "Unsupported value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "metacontroller.k8s.io/v1alpha1",
				"metadata":   map[string]any{"name": "invalid"},
			}}
			if tc.file == "compositecontrollers" {
				obj.SetKind("CompositeController")
				obj.Object["spec"] = map[string]any{
					"parentResource": map[string]any{"apiVersion": "ctl.example.com/v1", "resource": "things"},
					"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/sync"}}},
				}
			} else {
				obj.SetKind("DecoratorController")
				obj.Object["spec"] = map[string]any{
					"resources": []any{map[string]any{"apiVersion": "v1", "resource": "pods"}},
					"hooks":     map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/sync"}}},
				}
			}
			client := env.Dynamic.Resource(tc.resource)
			// The unmutated object is valid: the case tests its mutation alone.
			if _, err := client.Create(ctx(t), obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Fatalf("the base object is rejected: %v", err)
			}
			tc.mutate(obj)
			_, err := client.Create(ctx(t), obj, metav1.CreateOptions{})
			if err == nil {
				_ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
				t.Fatal("the server accepted an invalid object")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an Invalid error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func TestKubectlGetShowsPrinterColumns(t *testing.T) {
	obj := readManifest(t, "compositecontroller-full.yaml")
	obj.SetName("printer-columns")
	status := obj.Object["status"]
	client := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	created, err := client.Create(ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	// Status goes through the subresource: the create above dropped it.
	created.Object["status"] = status
	if _, err := client.UpdateStatus(ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"compositecontrollers", "cc", "cctl"} {
		out, err := env.Kubectl(ctx(t), "get", name, "printer-columns")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl get %s: want a header and one row, got:\n%s", name, out)
		}
		if header := strings.Fields(lines[0]); !cmp.Equal(header, []string{"NAME", "PARENT", "READY", "REASON", "FAILING", "AGE"}) {
			t.Errorf("kubectl get %s header = %v", name, header)
		}
		if row := strings.Fields(lines[1]); len(row) != 6 || row[0] != "printer-columns" || row[1] != "things" || row[2] != "True" || row[3] != "Running" || row[4] != "2" {
			t.Errorf("kubectl get %s row = %v, want printer-columns things True Running 2 <age>", name, row)
		}
	}
	// -o wide adds the Ready condition's message.
	wide, err := env.Kubectl(ctx(t), "get", "cc", "printer-columns", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if header := strings.Fields(strings.SplitN(wide, "\n", 2)[0]); !cmp.Equal(header, []string{"NAME", "PARENT", "READY", "REASON", "FAILING", "AGE", "MESSAGE"}) ||
		!strings.Contains(wide, "informers synced, 2 workers") {
		t.Errorf("kubectl get cc -o wide:\n%s", wide)
	}

	dec := readManifest(t, "decoratorcontroller-full.yaml")
	dec.SetName("printer-columns")
	decClient := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
	if _, err := decClient.Create(ctx(t), dec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decClient.Delete(context.Background(), dec.GetName(), metav1.DeleteOptions{}) })
	for _, name := range []string{"dec", "decorators"} {
		out, err := env.Kubectl(ctx(t), "get", name)
		if err != nil {
			t.Fatal(err)
		}
		if header := strings.Fields(strings.SplitN(out, "\n", 2)[0]); !cmp.Equal(header, []string{"NAME", "READY", "REASON", "FAILING", "AGE"}) {
			t.Errorf("kubectl get %s header = %v", name, header)
		}
		if !strings.Contains(out, "printer-columns") {
			t.Errorf("kubectl get %s does not list the object:\n%s", name, out)
		}
	}
}
