package informer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/jsonscan"
)

// A Deployment as the API server sends it, with every kind of metadata.
const deploymentJSON = `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","generateName":"we-","namespace":"prod","uid":"0b5d2b49-4c5f-4a59-9d3c-31a4f3c8e6b1","resourceVersion":"12345","generation":3,"creationTimestamp":"2026-11-26T03:30:00Z","deletionTimestamp":"2026-11-26T04:00:00Z","deletionGracePeriodSeconds":30,"labels":{"app":"web","tier":"front"},"annotations":{"metacontroller.k8s.io/last-applied-configuration":"{\"a\":\"}{\\\"\"}","note":"x,y:z"},"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Site","name":"s","uid":"u-1","controller":true,"blockOwnerDeletion":true}],"finalizers":["metactl.io/cleanup"],"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"apps/v1","time":"2026-11-26T03:30:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx:1.27","args":["--x={\"y\": [1, 2]}"]}]}},"strategy":{}},"status":{"replicas":3,"ratio":0.5,"conditions":[{"type":"Available","status":"True"}],"big":9007199254740993}}`

// decodeDirectly is how the dynamic client decodes an object.
func decodeDirectly(t *testing.T, data string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return u.Object
}

func TestObjectDecodesAsTheDynamicClientDoes(t *testing.T) {
	for name, data := range map[string]string{
		"deployment":          deploymentJSON,
		"metadata last":       `{"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"},"metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"1","creationTimestamp":"2026-11-26T03:30:00Z"}}`,
		"managedFields first": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"managedFields":[{"manager":"m","time":"2026-11-26T03:30:00Z","fieldsV1":{"f:data":{}}}],"name":"a","creationTimestamp":"2026-11-26T03:30:00Z"}}`,
		"metadata only":       `{"metadata":{"name":"a","uid":"u","creationTimestamp":"2026-11-26T03:30:00Z"},"kind":"Namespace","apiVersion":"v1"}`,
		"spaces":              "{ \"apiVersion\" : \"v1\" ,\n \"metadata\" : { \"name\" : \"a\", \"creationTimestamp\":\"2026-11-26T03:30:00Z\" } ,\t\"kind\":\"ConfigMap\", \"data\" : { \"k\" : \"}\" } }",
	} {
		t.Run(name, func(t *testing.T) {
			o, err := NewObject([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			u, err := o.Unstructured()
			if err != nil {
				t.Fatal(err)
			}
			if want := decodeDirectly(t, data); !reflect.DeepEqual(u.Object, want) {
				got, _ := json.Marshal(u.Object)
				wantJSON, _ := json.Marshal(want)
				t.Errorf("decoded\n%s\nwant\n%s", got, wantJSON)
			}
			if o.ManagedFields != nil {
				t.Error("managedFields kept")
			}
			if f, err := jsonscan.TopLevel(o.body); err != nil || f.Metadata.Start != 0 || strings.Contains(string(o.body), "managedFields") {
				t.Errorf("body keeps metadata, or is broken (%v): %s", err, o.body)
			}
		})
	}
}

func TestObjectMetadataAndCopy(t *testing.T) {
	o, err := NewObject([]byte(deploymentJSON))
	if err != nil {
		t.Fatal(err)
	}
	if o.GetName() != "web" || o.GetNamespace() != "prod" || o.GetResourceVersion() != "12345" || o.GetGeneration() != 3 {
		t.Errorf("metadata = %+v", o.ObjectMeta)
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref == nil || ref.UID != "u-1" {
		t.Errorf("controller ref = %v", ref)
	}
	if got := o.GroupVersionKind(); got != (schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}) {
		t.Errorf("GroupVersionKind = %v", got)
	}
	c := o.DeepCopyObject().(*Object)
	c.SetLabels(map[string]string{"app": "changed"})
	c.GetAnnotations()["a"] = "changed"
	if o.Labels.Get("app") != "web" || o.GetLabels()["app"] != "web" {
		t.Error("DeepCopyObject shares labels")
	}
	if o.GetAnnotations()["a"] == "changed" {
		t.Error("GetAnnotations returns the object's own map")
	}
	u1, _ := o.Unstructured()
	u1.SetLabels(nil)
	unstructured.RemoveNestedField(u1.Object, "spec")
	u2, _ := o.Unstructured()
	if u2.GetLabels()["app"] != "web" || u2.Object["spec"] == nil {
		t.Error("Unstructured returns objects that share state")
	}
}

func TestObjectList(t *testing.T) {
	data := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"77","continue":"abc"},"items":[` +
		`{"metadata":{"name":"a","namespace":"n","creationTimestamp":"2026-11-26T03:30:00Z"},"data":{"k":"]"}},` +
		` {"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b","namespace":"n","creationTimestamp":"2026-11-26T03:30:00Z"}} ]}`
	l, err := NewObjectList([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if l.ResourceVersion != "77" || l.Continue != "abc" || len(l.Items) != 2 {
		t.Fatalf("list = %+v", l)
	}
	for _, item := range l.Items {
		if item.Kind != "ConfigMap" || item.APIVersion != "v1" {
			t.Errorf("item %s: kind %q apiVersion %q", item.Name, item.Kind, item.APIVersion)
		}
	}
	u, err := l.Items[0].Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "ConfigMap" || u.Object["data"].(map[string]any)["k"] != "]" {
		t.Errorf("item = %v", u.Object)
	}
	for _, empty := range []string{`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`, `{"kind":"ConfigMapList","items":null}`} {
		if l, err := NewObjectList([]byte(empty)); err != nil || len(l.Items) != 0 {
			t.Errorf("%s: %v, %v", empty, l, err)
		}
	}
}

func TestObjectRejectsBrokenJSON(t *testing.T) {
	for _, data := range []string{
		``, `[]`, `{`, `{"metadata":}`, `{"metadata":{"name":"a"}`, `{"a":"unterminated}`,
		`{"metadata":{"name":"a"}} trailing`, `{"metadata" {"name":"a"}}`, `{"metadata":{"name":1}}`,
		`{}0`, `{} {}`,
	} {
		if _, err := NewObject([]byte(data)); err == nil {
			t.Errorf("NewObject(%q) accepted it", data)
		}
	}
}

// FuzzNewObject checks that NewObject never panics, that an Object it
// accepts from valid JSON always decodes (the informer's readers have no
// way to handle a cached object that does not), and that an object the
// dynamic client decodes too decodes the same way through Object.
func FuzzNewObject(f *testing.F) {
	f.Add(deploymentJSON)
	f.Add(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`)
	f.Add(`{"kind":"X","metadata":{"name":"a\"}"}}`)
	f.Fuzz(func(t *testing.T, data string) {
		o, err := NewObject([]byte(data))
		if err != nil {
			return // refused: the informer drops it with that error
		}
		// NewObject checks the body's brackets, not its JSON (that costs a
		// full parse): valid JSON must decode.
		u, err := o.Unstructured()
		if err != nil {
			if json.Valid([]byte(data)) {
				t.Fatalf("NewObject accepted %q, but Unstructured fails: %v", data, err)
			}
			return
		}
		direct := &unstructured.Unstructured{}
		if err := direct.UnmarshalJSON([]byte(data)); err != nil {
			return // the dynamic client refuses it (no kind, say): nothing to compare
		}
		if _, ok := direct.Object["metadata"].(map[string]any); !ok {
			return // metadata that is not an object is dropped by the direct decode
		}
		// The metadata goes through metav1.ObjectMeta, which keeps only the
		// fields it knows; compare the rest, and the name.
		got, want := u.DeepCopy(), direct.DeepCopy()
		delete(got.Object, "metadata")
		delete(want.Object, "metadata")
		if !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("body differs:\n%v\n%v", got.Object, want.Object)
		}
		if u.GetName() != direct.GetName() || u.GetNamespace() != direct.GetNamespace() {
			t.Errorf("name %q/%q, want %q/%q", u.GetNamespace(), u.GetName(), direct.GetNamespace(), direct.GetName())
		}
	})
}

// TestObjectKeepsOnlyMetactlManagedFields: of an object's managedFields,
// the entries of the metactl/... field managers are kept (server-side
// apply reads them), every other one dropped; "metactl" alone (metactl's
// client-side writes) is another manager.
func TestObjectKeepsOnlyMetactlManagedFields(t *testing.T) {
	data := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":[` +
		`{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":"2026-11-26T03:30:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:x":{}}}},` +
		`{"manager":"metactl","operation":"Update","apiVersion":"v1","time":"2026-11-26T03:30:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:y":{}}}},` +
		`{"manager":"metactl/web","operation":"Apply","apiVersion":"v1","time":"2026-11-26T03:30:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}}}` +
		`]},"data":{"k":"v","x":"1","y":"2"}}`
	o, err := NewObject([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.ManagedFields) != 1 || o.ManagedFields[0].Manager != "metactl/web" || string(o.ManagedFields[0].FieldsV1.GetRawBytes()) != `{"f:data":{"f:k":{}}}` {
		t.Errorf("managedFields kept: %+v, want metactl/web's entry only", o.ManagedFields)
	}
	u, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	if got := u.GetManagedFields(); len(got) != 1 || got[0].Manager != "metactl/web" {
		t.Errorf("decoded managedFields %+v, want metactl/web's entry", got)
	}
}

// TestObjectListKeeping keeps, of a list, the items NewObjectList and a
// filter on their namespace would keep, the same as those, and counts the
// others; an item whose namespace needs the decoder (an escape, null) is
// decoded and filtered by its decoded namespace; an item left out is not
// decoded, so one that would not decode is no error, while one kept is.
func TestObjectListKeeping(t *testing.T) {
	data := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"77"},"items":[` +
		`{"metadata":{"name":"a","namespace":"in","labels":{"namespace":"out"}},"data":{"k":"v"}},` +
		`{"metadata":{"name":"b","namespace":"out"}},` +
		`{"metadata":{"name":"c","namespace":"\u0069n"}},` +
		`{"metadata":{"name":"d","namespace":"o\u0075t"}},` +
		`{"metadata":{"name":"e"}},` +
		`{"metadata":{"namespace":null,"name":"f"}},` +
		`{"metadata":{"namespace":"out","name":"broken","labels":5}},` +
		`{"data":{}}]}`
	keep := func(ns string) bool { return ns == "in" || ns == "" }
	all, err := NewObjectList([]byte(strings.Replace(data, `,"labels":5`, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var want []Object
	for _, o := range all.Items {
		if keep(o.Namespace) {
			want = append(want, o)
		}
	}
	got, err := NewObjectListKeeping([]byte(data), keep)
	if err != nil {
		t.Fatalf("a list whose broken item is left out: %v", err)
	}
	if !reflect.DeepEqual(got.Items, want) {
		t.Errorf("kept %v, want %v", objectKeys(got.Items), objectKeys(want))
	}
	if got.ResourceVersion != "77" || got.leftOut != len(all.Items)-len(want) {
		t.Errorf("resourceVersion %q, left out %d; want 77 and %d", got.ResourceVersion, got.leftOut, len(all.Items)-len(want))
	}
	if _, err := NewObjectListKeeping([]byte(data), func(string) bool { return true }); err == nil {
		t.Error("a list keeping an item that does not decode: no error")
	}
}

func objectKeys(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return out
}
