package apply

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The golden annotations in this file were written by hand from
// metacontroller's algorithm: it records the hook's child (after
// defaulting its namespace to the parent's, and before appending its own
// controller reference) as encoding/json marshals a map: compact, keys
// sorted, <, > and & escaped as \u003c, \u003e and \u0026.

// controllerRef is the controller reference metactl (and metacontroller)
// puts on a child of parent Thing p.
const controllerRef = `{"apiVersion":"test.metactl.io/v1","kind":"Thing","name":"p","uid":"u-p","controller":true,"blockOwnerDeletion":true}`

// anchorRef is a non-controller owner reference a hook gave its child.
const anchorRef = `{"apiVersion":"v1","kind":"ConfigMap","name":"anchor","uid":"u-anchor"}`

// mcConfigMap is the annotation metacontroller writes for the hook's child
// {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"greeting",
// "labels":{"app":"hello"}},"data":{"text":"<b>hi</b> & bye","ratio":"1.50"}}
// of a parent in namespace ns.
const mcConfigMap = `{"apiVersion":"v1","data":{"ratio":"1.50","text":"\u003cb\u003ehi\u003c/b\u003e \u0026 bye"},"kind":"ConfigMap","metadata":{"labels":{"app":"hello"},"name":"greeting","namespace":"ns"}}`

// desiredConfigMap is that child as metactl's desired state: namespace
// defaulted, controller reference set.
const desiredConfigMap = `{"apiVersion":"v1","kind":"ConfigMap",
	"metadata":{"name":"greeting","namespace":"ns","labels":{"app":"hello"},"ownerReferences":[` + controllerRef + `]},
	"data":{"text":"<b>hi</b> & bye","ratio":"1.50"}}`

// mcDeployment is the annotation metacontroller writes for a hook's child
// with numbers, nested lists and an owner reference of its own.
const mcDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"anchor","uid":"u-anchor"}]},"spec":{"replicas":3,"template":{"spec":{"containers":[{"image":"img:1","name":"c","ports":[{"containerPort":8080}]}]}},"weight":0.5}}`

// desiredDeployment is that child as metactl's desired state: its
// controller reference first, the hook's after it.
const desiredDeployment = `{"apiVersion":"apps/v1","kind":"Deployment",
	"metadata":{"name":"web","namespace":"ns","ownerReferences":[` + controllerRef + `,` + anchorRef + `]},
	"spec":{"weight":0.5,"replicas":3,"template":{"spec":{"containers":[{"name":"c","image":"img:1","ports":[{"containerPort":8080}]}]}}}}`

func TestSetLastAppliedRecordsAsMetacontroller(t *testing.T) {
	for _, tt := range []struct{ name, desired, want string }{
		{"ConfigMap", desiredConfigMap, mcConfigMap},
		{"numbers, lists and the hook's owner reference", desiredDeployment, mcDeployment},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := object(t, tt.desired)
			if err := SetLastApplied(obj, obj.Object); err != nil {
				t.Fatal(err)
			}
			if got, _ := annotationOf(t, obj); got != tt.want {
				t.Errorf("annotation\n got %s\nwant %s", got, tt.want)
			}
			// The object itself keeps its controller reference.
			if refs := obj.GetOwnerReferences(); len(refs) == 0 || refs[0].Name != "p" {
				t.Errorf("owner references = %v, want the controller reference kept", refs)
			}
		})
	}
}

// written returns obj as the API server holds it after metacontroller
// wrote it: server fields, the given owner references and annotation.
func written(t *testing.T, desired string, ownerRefs []any, annotation string) *unstructured.Unstructured {
	t.Helper()
	obj := object(t, desired)
	meta := obj.Object["metadata"].(map[string]any)
	meta["uid"] = "u-child"
	meta["resourceVersion"] = "41"
	meta["creationTimestamp"] = "2024-01-01T00:00:00Z"
	meta["managedFields"] = []any{map[string]any{"manager": "metacontroller", "operation": "Update"}}
	if ownerRefs == nil {
		delete(meta, "ownerReferences")
	} else {
		meta["ownerReferences"] = ownerRefs
	}
	if annotation != "" {
		a, _ := meta["annotations"].(map[string]any)
		if a == nil {
			a = map[string]any{}
		}
		a[LastAppliedAnnotation] = annotation
		meta["annotations"] = a
	}
	return obj
}

func refs(t *testing.T, js ...string) []any {
	t.Helper()
	out := make([]any, len(js))
	for i, j := range js {
		out[i] = decode(t, j)
	}
	return out
}

// TestApplyTakesOverMetacontrollersChildren: a child metacontroller wrote,
// unchanged in the hook's answer, is not written.
func TestApplyTakesOverMetacontrollersChildren(t *testing.T) {
	tests := []struct {
		name     string
		observed func(t *testing.T) *unstructured.Unstructured
		desired  string
	}{
		{
			name: "ConfigMap",
			observed: func(t *testing.T) *unstructured.Unstructured {
				return written(t, desiredConfigMap, refs(t, controllerRef), mcConfigMap)
			},
			desired: desiredConfigMap,
		},
		{
			name: "owner references in metacontroller's order: the hook's, then the controller's",
			observed: func(t *testing.T) *unstructured.Unstructured {
				return written(t, desiredDeployment, refs(t, anchorRef, controllerRef), mcDeployment)
			},
			desired: desiredDeployment,
		},
		{
			name: "metacontroller that did not default the namespace",
			observed: func(t *testing.T) *unstructured.Unstructured {
				return written(t, desiredConfigMap, refs(t, controllerRef),
					`{"apiVersion":"v1","data":{"ratio":"1.50","text":"\u003cb\u003ehi\u003c/b\u003e \u0026 bye"},"kind":"ConfigMap","metadata":{"labels":{"app":"hello"},"name":"greeting"}}`)
			},
			desired: desiredConfigMap,
		},
		{
			name: "hook that echoes the observed child: metacontroller recorded status, server fields and its emptied annotation",
			observed: func(t *testing.T) *unstructured.Unstructured {
				o := written(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"k":"v"}}`, refs(t, controllerRef),
					`{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"annotations":{"metacontroller.k8s.io/last-applied-configuration":""},"creationTimestamp":"2024-01-01T00:00:00Z","name":"c","namespace":"ns","ownerReferences":[`+controllerRef+`],"resourceVersion":"40","uid":"u-child"},"status":{"x":1}}`)
				o.Object["status"] = map[string]any{"x": int64(1)}
				return o
			},
			// The echo of the child as observed now, with metactl's
			// controller reference.
			desired: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","uid":"u-child","resourceVersion":"41",
				"annotations":{"` + LastAppliedAnnotation + `":"{}"},"ownerReferences":[` + controllerRef + `]},"data":{"k":"v"},"status":{"x":1}}`,
		},
		{
			name: "metactl's earlier annotation, which recorded the controller reference",
			observed: func(t *testing.T) *unstructured.Unstructured {
				return written(t, desiredConfigMap, refs(t, controllerRef),
					`{"apiVersion":"v1","data":{"ratio":"1.50","text":"\u003cb\u003ehi\u003c/b\u003e \u0026 bye"},"kind":"ConfigMap","metadata":{"labels":{"app":"hello"},"name":"greeting","namespace":"ns","ownerReferences":[`+controllerRef+`]}}`)
			},
			desired: desiredConfigMap,
		},
		{
			name: "Secret: metacontroller recorded the data values in clear",
			observed: func(t *testing.T) *unstructured.Unstructured {
				return written(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"},"type":"Opaque","data":{"password":"aHVudGVyMg=="}}`,
					refs(t, controllerRef), `{"apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"kind":"Secret","metadata":{"name":"s","namespace":"ns"}}`)
			},
			desired: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns","ownerReferences":[` + controllerRef + `]},"data":{"password":"aHVudGVyMg=="}}`,
		},
		{
			name: "Secret: metacontroller recorded stringData in clear",
			observed: func(t *testing.T) *unstructured.Unstructured {
				return written(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"},"type":"Opaque","data":{"password":"aHVudGVyMg=="}}`,
					refs(t, controllerRef), `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"},"stringData":{"password":"hunter2"}}`)
			},
			desired: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns","ownerReferences":[` + controllerRef + `]},"stringData":{"password":"hunter2"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := tt.observed(t)
			before, _ := annotationOf(t, observed)
			res, changed := mustApply(t, observed, object(t, tt.desired))
			if changed {
				t.Errorf("changed = true, want no write; result\n%s\nobserved\n%s", encode(res.Object), encode(observed.Object))
			}
			if after, _ := annotationOf(t, res); after != before {
				t.Errorf("annotation\n got %s\nwant it kept\n     %s", after, before)
			}
		})
	}
}

// TestApplyRewritesMetacontrollersAnnotationOnWrite: a child metacontroller
// wrote that must be written anyway gets metactl's annotation.
func TestApplyRewritesMetacontrollersAnnotationOnWrite(t *testing.T) {
	t.Run("ConfigMap with a changed value", func(t *testing.T) {
		observed := written(t, desiredConfigMap, refs(t, anchorRef, controllerRef), mcConfigMap)
		desired := object(t, strings.Replace(desiredConfigMap, `"ratio":"1.50"`, `"ratio":"2"`, 1))
		res, changed := mustApply(t, observed, desired)
		if !changed {
			t.Fatal("changed = false, want a write")
		}
		want := `{"apiVersion":"v1","data":{"ratio":"2","text":"\u003cb\u003ehi\u003c/b\u003e \u0026 bye"},"kind":"ConfigMap","metadata":{"labels":{"app":"hello"},"name":"greeting","namespace":"ns"}}`
		if got, _ := annotationOf(t, res); got != want {
			t.Errorf("annotation\n got %s\nwant %s", got, want)
		}
		// The hook gave no anchor reference: someone else's, kept, in place.
		if got := encode(res.Object["metadata"].(map[string]any)["ownerReferences"]); got != encode(refs(t, anchorRef, controllerRef)) {
			t.Errorf("owner references = %s", got)
		}
	})
	t.Run("field metacontroller recorded and the hook no longer wants", func(t *testing.T) {
		observed := written(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"a":"1","b":"2","theirs":"3"}}`,
			refs(t, controllerRef), `{"apiVersion":"v1","data":{"a":"1","b":"2"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)
		desired := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","ownerReferences":[`+controllerRef+`]},"data":{"a":"1"}}`)
		res, changed := mustApply(t, observed, desired)
		if !changed {
			t.Fatal("changed = false, want a write")
		}
		if got := encode(res.Object["data"]); got != `{"a":"1","theirs":"3"}` {
			t.Errorf("data = %s, want b removed, theirs kept", got)
		}
	})
	for _, tt := range []struct{ name, observedData, desired string }{
		{"Secret with a changed value", `{"password":"aHVudGVyMg=="}`,
			`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns","ownerReferences":[` + controllerRef + `]},"stringData":{"password":"changed"}}`},
		{"Secret written for a label: the values in clear go", `{"password":"aHVudGVyMg=="}`,
			`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns","labels":{"new":"x"},"ownerReferences":[` + controllerRef + `]},"data":{"password":"aHVudGVyMg=="}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			observed := written(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns"},"type":"Opaque","data":`+tt.observedData+`}`,
				refs(t, controllerRef), `{"apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"kind":"Secret","metadata":{"name":"s","namespace":"ns"}}`)
			res, changed := mustApply(t, observed, object(t, tt.desired))
			if !changed {
				t.Fatal("changed = false, want a write")
			}
			ann, _ := annotationOf(t, res)
			for _, secret := range []string{"aHVudGVyMg", "hunter2", "Y2hhbmdlZA", "changed"} {
				if strings.Contains(ann, secret) {
					t.Errorf("annotation holds a secret value: %s", ann)
				}
			}
			if !strings.Contains(ann, `"password":"sha256:`) {
				t.Errorf("annotation does not record the key as a digest: %s", ann)
			}
			// And the next round is quiet.
			if res2, changed := mustApply(t, res, object(t, tt.desired)); changed {
				t.Errorf("second apply changed the Secret: %s", encode(res2.Object))
			}
		})
	}
}
