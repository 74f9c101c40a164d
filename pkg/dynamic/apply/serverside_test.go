package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// withEntry returns obj with manager's Apply entry owning fields (FieldsV1
// JSON) at apiVersion v1.
func withEntry(obj map[string]any, manager, fields string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}})
	return u
}

func TestConfiguration(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "s", "resourceVersion": "7", "annotations": map[string]any{LastAppliedAnnotation: "{}"}},
		"stringData": map[string]any{"k": "v"}, "type": nil, "status": map[string]any{"x": int64(1)},
	}}
	config, err := Configuration(desired)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}, "data": map[string]any{"k": "dg=="}}
	if !equal(config.Object, want) {
		t.Errorf("Configuration = %v, want %v", config.Object, want)
	}
	if _, ok := desired.Object["stringData"]; !ok {
		t.Error("desired was modified")
	}
}

func TestServerSide(t *testing.T) {
	const m = "metactl/c"
	desired := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s"},
			"spec": map[string]any{
				"ports":      []any{map[string]any{"port": int64(80)}},
				"selector":   map[string]any{"app": "a"},
				"ipFamilies": []any{"IPv4"},
			},
		}}
	}
	owned := `{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{},"f:protocol":{}}},"f:selector":{"f:app":{}},"f:ipFamilies":{}}}`
	live := func() map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s"},
			"spec": map[string]any{
				"ports":      []any{map[string]any{"port": int64(80), "protocol": "TCP", "targetPort": int64(80)}, map[string]any{"port": int64(81), "protocol": "TCP"}},
				"selector":   map[string]any{"app": "a"},
				"ipFamilies": []any{"IPv4"},
				"clusterIP":  "10.0.0.1",
			},
		}
	}
	for name, tc := range map[string]struct {
		observed *unstructured.Unstructured
		desired  func(*unstructured.Unstructured)
		changed  bool
	}{
		"as applied, defaults and others' fields around": {withEntry(live(), m, owned), nil, false},
		"no entry of the manager":                        {withEntry(live(), "metactl/other", owned), nil, true},
		"entry of another apiVersion": {func() *unstructured.Unstructured {
			u := withEntry(live(), m, owned)
			u.GetManagedFields()
			mf := u.GetManagedFields()
			mf[0].APIVersion = "v2"
			u.SetManagedFields(mf)
			return u
		}(), nil, true},
		"a value changed by someone": {withEntry(func() map[string]any {
			l := live()
			l["spec"].(map[string]any)["selector"] = map[string]any{"app": "b"}
			return l
		}(), m, owned), nil, true},
		"an atomic list grown by someone": {withEntry(func() map[string]any {
			l := live()
			l["spec"].(map[string]any)["ipFamilies"] = []any{"IPv4", "IPv6"}
			return l
		}(), m, owned), nil, true},
		"a list map element removed by someone": {withEntry(func() map[string]any {
			l := live()
			l["spec"].(map[string]any)["ports"] = []any{map[string]any{"port": int64(81)}}
			return l
		}(), m, owned), nil, true},
		"an owned field desired no longer sets":       {withEntry(live(), m, owned), func(d *unstructured.Unstructured) { unstructured.RemoveNestedField(d.Object, "spec", "selector") }, true},
		"an owned field desired sets to null":         {withEntry(live(), m, owned), func(d *unstructured.Unstructured) { d.Object["spec"].(map[string]any)["selector"] = nil }, true},
		"a new desired field with the observed value": {withEntry(live(), m, owned), func(d *unstructured.Unstructured) { d.Object["spec"].(map[string]any)["clusterIP"] = "10.0.0.1" }, false},
		"a desired list map element the manager lacks": {withEntry(live(), m, owned), func(d *unstructured.Unstructured) {
			d.Object["spec"].(map[string]any)["ports"] = []any{map[string]any{"port": int64(80)}, map[string]any{"port": int64(81)}}
		}, true},
		"nothing observed": {nil, nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			d := desired()
			if tc.desired != nil {
				tc.desired(d)
			}
			_, changed, err := ServerSide(tc.observed, d, m)
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
		})
	}
}
