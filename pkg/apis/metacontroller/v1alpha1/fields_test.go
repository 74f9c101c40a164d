package v1alpha1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/manifests"
)

// fieldSet is what testdata/metacontroller-fields.txt lists for one kind.
type fieldSet struct {
	fields, required sets.Set[string]
}

// metacontrollerFields reads testdata/metacontroller-fields.txt: the
// fields of metacontroller's CRDs, by kind.
func metacontrollerFields(t *testing.T) map[string]fieldSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "metacontroller-fields.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fieldSet{}
	for i, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words := strings.Fields(line)
		if len(words) != 3 {
			t.Fatalf("metacontroller-fields.txt:%d: want <Kind> field|required <path>, got %q", i+1, line)
		}
		kind, what, path := words[0], words[1], words[2]
		fs, ok := out[kind]
		if !ok {
			fs = fieldSet{fields: sets.New[string](), required: sets.New[string]()}
			out[kind] = fs
		}
		switch what {
		case "field":
			fs.fields.Insert(path)
		case "required":
			fs.required.Insert(path)
		default:
			t.Fatalf("metacontroller-fields.txt:%d: unknown %q", i+1, what)
		}
	}
	return out
}

// crdSchemas returns the schema of metactl's CRDs, by kind.
func crdSchemas(t *testing.T) map[string]*apiextensionsv1.JSONSchemaProps {
	t.Helper()
	crds, err := manifests.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, crd := range crds {
		out[crd.Spec.Names.Kind] = crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	return out
}

// isLeaf reports whether a field of schema s is a field of its own in a
// path: a scalar, a map or an object of any content.
func isLeaf(s *apiextensionsv1.JSONSchemaProps) bool {
	return len(s.Properties) == 0 && s.Items == nil
}

// schemaFields walks schema s at path and adds the path of every field to
// fields, and of every required field to required, in the notation of
// metacontroller-fields.txt.
func schemaFields(s *apiextensionsv1.JSONSchemaProps, path string, fields, required sets.Set[string]) {
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch {
	case s.Items != nil && s.Items.Schema != nil:
		item := s.Items.Schema
		if isLeaf(item) {
			fields.Insert(path + "[]")
			return
		}
		schemaFields(item, path+"[]", fields, required)
	case isLeaf(s):
		fields.Insert(path)
	default:
		for _, name := range s.Required {
			required.Insert(join(name))
		}
		for name, prop := range s.Properties {
			schemaFields(&prop, join(name), fields, required)
		}
	}
}

// manifestFields adds to fields the path of every field set in value,
// which schema s describes.
func manifestFields(value any, s *apiextensionsv1.JSONSchemaProps, path string, fields sets.Set[string]) {
	switch v := value.(type) {
	case []any:
		if s.Items == nil || s.Items.Schema == nil || isLeaf(s.Items.Schema) {
			fields.Insert(path + "[]")
			return
		}
		for _, item := range v {
			manifestFields(item, s.Items.Schema, path+"[]", fields)
		}
	case map[string]any:
		if isLeaf(s) {
			fields.Insert(path)
			return
		}
		for name, item := range v {
			prop, ok := s.Properties[name]
			if !ok {
				fields.Insert(path + "." + name + " (not in the schema)")
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			manifestFields(item, &prop, p, fields)
		}
	default:
		fields.Insert(path)
	}
}

// manifestDocs returns the objects of the YAML documents of a testdata file.
func manifestDocs(t *testing.T, file string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// everyFieldManifests are, by kind, the testdata files whose objects
// together set every field of metacontroller's CRDs.
var everyFieldManifests = map[string][]string{
	"CompositeController": {"compositecontroller-full.yaml", "compositecontroller-full-more.yaml"},
	"DecoratorController": {"decoratorcontroller-full.yaml", "decoratorcontroller-full-more.yaml"},
	"ControllerRevision":  {"controllerrevision-full.yaml"},
}

// TestCRDsDefineEveryMetacontrollerField compares metactl's CRDs with the
// fields of metacontroller's: every field must be defined (or the API
// server would prune it, or refuse it under strict field validation), and
// no field may be required that metacontroller does not require.
func TestCRDsDefineEveryMetacontrollerField(t *testing.T) {
	schemas := crdSchemas(t)
	for kind, mc := range metacontrollerFields(t) {
		t.Run(kind, func(t *testing.T) {
			schema, ok := schemas[kind]
			if !ok {
				t.Fatalf("metactl has no CRD of kind %s", kind)
			}
			// What a manifest may set: not the status, which only
			// controllers write, through the status subresource.
			fields, required := sets.New[string](), sets.New[string]()
			for name, prop := range schema.Properties {
				if name != "status" {
					schemaFields(&prop, name, fields, required)
				}
			}
			if missing := sets.List(mc.fields.Difference(fields)); len(missing) > 0 {
				t.Errorf("metacontroller's fields that metactl's CRD lacks:\n  %s", strings.Join(missing, "\n  "))
			}
			if extra := sets.List(required.Difference(mc.required)); len(extra) > 0 {
				t.Errorf("fields metactl's CRD requires and metacontroller's does not:\n  %s", strings.Join(extra, "\n  "))
			}
		})
	}
}

// TestFullManifestsSetEveryMetacontrollerField checks the test data that
// the tests on the API server use: together, the full manifests of a kind
// set every field metacontroller defines.
func TestFullManifestsSetEveryMetacontrollerField(t *testing.T) {
	schemas := crdSchemas(t)
	for kind, mc := range metacontrollerFields(t) {
		t.Run(kind, func(t *testing.T) {
			set := sets.New[string]()
			for _, file := range everyFieldManifests[kind] {
				for _, obj := range manifestDocs(t, file) {
					if obj["kind"] != kind {
						t.Fatalf("%s holds a %v", file, obj["kind"])
					}
					delete(obj, "apiVersion")
					delete(obj, "kind")
					delete(obj, "metadata")
					delete(obj, "status")
					manifestFields(obj, schemas[kind], "", set)
				}
			}
			if missing := sets.List(mc.fields.Difference(set)); len(missing) > 0 {
				t.Errorf("fields of metacontroller's CRD that %v do not set:\n  %s", everyFieldManifests[kind], strings.Join(missing, "\n  "))
			}
			if unknown := slices.DeleteFunc(sets.List(set), func(p string) bool { return !strings.HasSuffix(p, "(not in the schema)") }); len(unknown) > 0 {
				t.Errorf("fields of %v that metactl's CRD does not define:\n  %s", everyFieldManifests[kind], strings.Join(unknown, "\n  "))
			}
		})
	}
}
