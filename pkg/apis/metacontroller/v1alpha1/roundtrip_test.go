package v1alpha1

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes a YAML manifest into obj and returns the fields of
// data that obj has no place for.
func decodeStrict(t *testing.T, data []byte, obj any) []error {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("YAML to JSON: %v", err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(js, obj)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return strictErrs
}

func TestRoundTripLosesNothing(t *testing.T) {
	for file, newObj := range map[string]func() runtime.Object{
		"compositecontroller-full.yaml": func() runtime.Object { return &CompositeController{} },
		"decoratorcontroller-full.yaml": func() runtime.Object { return &DecoratorController{} },
		"controllerrevision-full.yaml":  func() runtime.Object { return &ControllerRevision{} },
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			obj := newObj()
			if unknown := decodeStrict(t, data, obj); len(unknown) > 0 {
				t.Fatalf("fields the types do not know: %v", unknown)
			}
			encoded, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var want, got map[string]any
			if err := yaml.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(encoded, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decode then encode changed the manifest (-manifest +encoded):\n%s", diff)
			}
			// The deep copy is the generated one; it must be deep and equal.
			copied := obj.DeepCopyObject()
			if diff := cmp.Diff(obj, copied); diff != "" {
				t.Errorf("DeepCopyObject differs:\n%s", diff)
			}
		})
	}
}

func TestUnknownFieldsAreReported(t *testing.T) {
	manifest := `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: typo}
spec:
  parentResource: {apiVersion: v1, resource: configmaps, labelSelectr: {}}
  hooks:
    sync:
      webhook: {url: "http://x/sync", timout: 5s}
`
	var cc CompositeController
	unknown := decodeStrict(t, []byte(manifest), &cc)
	var msgs []string
	for _, err := range unknown {
		msgs = append(msgs, err.Error())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"spec.parentResource.labelSelectr", "spec.hooks.sync.webhook.timout"} {
		if !strings.Contains(joined, want) {
			t.Errorf("unknown field %s not reported; got %q", want, joined)
		}
	}
}

func TestAddToSchemeRegistersKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"CompositeController", "CompositeControllerList", "DecoratorController", "DecoratorControllerList", "ControllerRevision", "ControllerRevisionList"} {
		if !scheme.Recognizes(SchemeGroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognise %s", kind)
		}
	}
}
