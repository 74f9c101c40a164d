package apply

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object parses a JSON object into an Unstructured as a client would.
func object(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return u
}

// annotationOf returns obj's LastAppliedAnnotation and whether it is set.
func annotationOf(t testing.TB, obj *unstructured.Unstructured) (string, bool) {
	t.Helper()
	v, ok, err := unstructured.NestedString(obj.Object, "metadata", "annotations", LastAppliedAnnotation)
	if err != nil {
		t.Fatalf("annotation: %v", err)
	}
	return v, ok
}

// mustApply applies and fails the test on error.
func mustApply(t testing.TB, observed, desired *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	t.Helper()
	res, changed, err := Apply(observed, desired)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res, changed
}

const observedPod = `{
	"apiVersion": "v1", "kind": "Pod",
	"metadata": {
		"name": "p", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7",
		"generation": 2, "creationTimestamp": "2024-01-01T00:00:00Z",
		"managedFields": [{"manager": "kubectl", "operation": "Update"}],
		"labels": {"app": "p"}
	},
	"spec": {"containers": [{"name": "c", "image": "img:1", "imagePullPolicy": "IfNotPresent"}]},
	"status": {"phase": "Running", "podIP": "10.0.0.9"}
}`

func TestApplyNeverWritesStatus(t *testing.T) {
	observed := object(t, observedPod)
	desired := object(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},
		"spec":{"containers":[{"name":"c","image":"img:2"}]},
		"status":{"phase":"Failed","message":"set by the hook"}}`)
	res, changed := mustApply(t, observed, desired)
	if !changed {
		t.Error("changed = false, want true (image changed)")
	}
	if !equal(res.Object["status"], observed.Object["status"]) {
		t.Errorf("status = %s, want observed's %s", encode(res.Object["status"]), encode(observed.Object["status"]))
	}
	ann, _ := annotationOf(t, res)
	if strings.Contains(ann, "status") || strings.Contains(ann, "Failed") {
		t.Errorf("annotation records status: %s", ann)
	}

	// Without status in observed, none appears.
	delete(observed.Object, "status")
	res, _ = mustApply(t, observed, desired)
	if s, ok := res.Object["status"]; ok {
		t.Errorf("status = %s, want none", encode(s))
	}
}

func TestApplyStripsReadOnlyMetadata(t *testing.T) {
	observed := object(t, observedPod)
	desired := object(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns",
		"uid":"forged","resourceVersion":"1","generation":99,"creationTimestamp":null,
		"deletionTimestamp":"2030-01-01T00:00:00Z","deletionGracePeriodSeconds":5,
		"managedFields":[],"selfLink":"/x","labels":{"app":"p"}},
		"spec":{"containers":[{"name":"c","image":"img:1"}]}}`)
	res, _ := mustApply(t, observed, desired)
	om := observed.Object["metadata"].(map[string]any)
	rm := res.Object["metadata"].(map[string]any)
	for _, k := range readOnlyMetadata {
		ov, oOK := om[k]
		rv, rOK := rm[k]
		if oOK != rOK || !equal(ov, rv) {
			t.Errorf("metadata.%s = %s (present %v), want observed's %s (present %v)", k, encode(rv), rOK, encode(ov), oOK)
		}
	}
	ann, _ := annotationOf(t, res)
	for _, k := range readOnlyMetadata {
		if strings.Contains(ann, `"`+k+`"`) {
			t.Errorf("annotation records %s: %s", k, ann)
		}
	}
}

func TestApplyRestoresReadOnlyMetadataWhenDesiredDeletesMetadata(t *testing.T) {
	observed := object(t, observedPod)
	desired := object(t, `{"apiVersion":"v1","kind":"Pod","metadata":null,"spec":{}}`)
	res, _ := mustApply(t, observed, desired)
	for _, k := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
		if !equal(res.Object["metadata"].(map[string]any)[k], observed.Object["metadata"].(map[string]any)[k]) {
			t.Errorf("metadata.%s not kept: %s", k, encode(res.Object["metadata"]))
		}
	}
	if _, ok := annotationOf(t, res); !ok {
		t.Error("annotation not written")
	}
}

func TestApplyWritesAnnotation(t *testing.T) {
	observed := object(t, observedPod)
	desired := object(t, `{"apiVersion":"v1","kind":"Pod",
		"metadata":{"name":"p","namespace":"ns","uid":"x","labels":{"app":"p","tier":"web"},
			"annotations":{"note":"hi","`+LastAppliedAnnotation+`":"{\"stale\":true}"}},
		"spec":{"containers":[{"name":"c","image":"img:1"}]},"status":{"phase":"x"}}`)
	res, _ := mustApply(t, observed, desired)
	ann, ok := annotationOf(t, res)
	if !ok {
		t.Fatal("annotation not written")
	}
	// Compact JSON of the stripped desired, keys sorted: no status, no uid,
	// no nested last-applied annotation.
	want := `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"note":"hi"},"labels":{"app":"p","tier":"web"},"name":"p","namespace":"ns"},"spec":{"containers":[{"image":"img:1","name":"c"}]}}`
	if ann != want {
		t.Errorf("annotation =\n%s\nwant\n%s", ann, want)
	}
	if got, _, _ := unstructured.NestedString(res.Object, "metadata", "annotations", "note"); got != "hi" {
		t.Errorf("annotation note = %q, want hi", got)
	}
	got, err := LastApplied(res)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, decode(t, want)) {
		t.Errorf("LastApplied = %s, want %s", encode(got), want)
	}
}

func TestApplyChanged(t *testing.T) {
	observed := object(t, observedPod)
	desired := object(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"app":"p"}},
		"spec":{"containers":[{"name":"c","image":"img:1"}]}}`)

	// First apply: nothing but the annotation differs, which is a change.
	res, changed := mustApply(t, observed, desired)
	if !changed {
		t.Fatal("first apply: changed = false, want true (annotation added)")
	}

	// Same desired again: no write.
	res2, changed := mustApply(t, res, desired)
	if changed {
		t.Errorf("second apply: changed = true, want false; result %s", encode(res2.Object))
	}
	if !equal(res2.Object, res.Object) {
		t.Errorf("second apply: result %s, want %s", encode(res2.Object), encode(res.Object))
	}

	// A label changes: a write.
	desired3 := desired.DeepCopy()
	if err := unstructured.SetNestedField(desired3.Object, "q", "metadata", "labels", "app"); err != nil {
		t.Fatal(err)
	}
	res3, changed := mustApply(t, res2, desired3)
	if !changed {
		t.Error("label change: changed = false, want true")
	}
	if got := res3.GetLabels()["app"]; got != "q" {
		t.Errorf("label app = %q, want q", got)
	}

	// Someone else's label, added between applies, is kept and not a change.
	res4 := res3.DeepCopy()
	labels := res4.GetLabels()
	labels["theirs"] = "x"
	res4.SetLabels(labels)
	res5, changed := mustApply(t, res4, desired3)
	if changed {
		t.Errorf("foreign label: changed = true, want false; result %s", encode(res5.Object))
	}
	if res5.GetLabels()["theirs"] != "x" {
		t.Errorf("foreign label lost: %v", res5.GetLabels())
	}

	// Removing our label from desired removes it, keeps theirs.
	desired6 := desired3.DeepCopy()
	unstructured.RemoveNestedField(desired6.Object, "metadata", "labels", "app")
	res6, changed := mustApply(t, res5, desired6)
	if !changed {
		t.Error("label removal: changed = false, want true")
	}
	if got := res6.GetLabels(); len(got) != 1 || got["theirs"] != "x" {
		t.Errorf("labels = %v, want only theirs=x", got)
	}
}

func TestApplyNumbersCompareByValue(t *testing.T) {
	observed := object(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":3}}`)
	desired := object(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":3}}`)
	res, _ := mustApply(t, observed, desired)
	// The desired state now says 3.0 (a float64): the same number.
	unstructured.SetNestedField(desired.Object, float64(3), "spec", "replicas")
	if _, changed := mustApply(t, res, desired); changed {
		t.Error("changed = true for replicas int64(3) -> float64(3), want false")
	}
}

func TestApplyKeepsEquivalentAnnotation(t *testing.T) {
	observed := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","annotations":{
		"`+LastAppliedAnnotation+`":"{ \"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c\"}, \"data\": {\"n\": \"1\"}, \"x\": 2.0 }"}},
		"data":{"n":"1"},"x":2}`)
	desired := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"n":"1"},"x":2}`)
	res, changed := mustApply(t, observed, desired)
	if changed {
		t.Errorf("changed = true for an annotation that differs only in encoding; result %s", encode(res.Object))
	}
}

func TestApplyToleratesUnparseableAnnotation(t *testing.T) {
	for _, bad := range []string{`{not json`, `[1,2]`, `null`, `"str"`, ``} {
		t.Run(bad, func(t *testing.T) {
			observed := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1","b":"2"}}`)
			observed.SetAnnotations(map[string]string{LastAppliedAnnotation: bad})
			if _, err := LastApplied(observed); err == nil {
				t.Error("LastApplied: no error for an unparseable annotation")
			}
			desired := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"2"}}`)
			res, changed, err := Apply(observed, desired)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !changed {
				t.Error("changed = false, want true")
			}
			// As with no last applied state: b is kept, a is updated.
			if got := res.Object["data"]; !equal(got, map[string]any{"a": "2", "b": "2"}) {
				t.Errorf("data = %s, want {a:2, b:2}", encode(got))
			}
			if _, err := LastApplied(res); err != nil {
				t.Errorf("annotation not replaced by a valid one: %v", err)
			}
		})
	}
}

func TestApplyDoesNotModifyArguments(t *testing.T) {
	observed := object(t, observedPod)
	observed.SetAnnotations(map[string]string{LastAppliedAnnotation: `{"metadata":{"labels":{"app":"p"}}}`})
	desired := object(t, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u",
		"annotations":{"`+LastAppliedAnnotation+`":"x","k":"v"}},
		"spec":{"containers":[{"name":"c","image":"img:2"}]},"status":{}}`)
	oc, dc := observed.DeepCopy(), desired.DeepCopy()
	res, _ := mustApply(t, observed, desired)
	if !equal(observed.Object, oc.Object) {
		t.Errorf("observed modified: %s", encode(observed.Object))
	}
	if !equal(desired.Object, dc.Object) {
		t.Errorf("desired modified: %s", encode(desired.Object))
	}
	scribble(res.Object)
	if !equal(observed.Object, oc.Object) || !equal(desired.Object, dc.Object) {
		t.Error("result shares state with the arguments")
	}
}

func TestApplyErrors(t *testing.T) {
	good := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`)
	if _, _, err := Apply(nil, good); err == nil {
		t.Error("nil observed: no error")
	}
	if _, _, err := Apply(good, nil); err == nil {
		t.Error("nil desired: no error")
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"metadata": "x"}}
	if _, _, err := Apply(good, bad); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("desired metadata not an object: err = %v", err)
	}
	bad = &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"annotations": []any{}}}}
	if _, _, err := Apply(good, bad); err == nil || !strings.Contains(err.Error(), "annotations") {
		t.Errorf("desired annotations not an object: err = %v", err)
	}
	withChan := &unstructured.Unstructured{Object: map[string]any{"spec": make(chan int)}}
	if _, _, err := Apply(good, withChan); err == nil || !strings.Contains(err.Error(), "ConfigMap c") {
		t.Errorf("non-JSON desired: err = %v, want one naming the object", err)
	}
}

func TestSetLastAppliedAndLastApplied(t *testing.T) {
	obj := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u","labels":{"a":"b"}},
		"data":{"k":"v"},"status":{"x":1}}`)
	if got, err := LastApplied(obj); got != nil || err != nil {
		t.Fatalf("LastApplied before = %v, %v; want nil, nil", got, err)
	}
	// desired aliases obj, as when creating a child from the desired object.
	if err := SetLastApplied(obj, obj.Object); err != nil {
		t.Fatal(err)
	}
	ann, _ := annotationOf(t, obj)
	want := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"labels":{"a":"b"},"name":"c"}}`
	if ann != want {
		t.Errorf("annotation = %s, want %s", ann, want)
	}
	got, err := LastApplied(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, decode(t, want)) {
		t.Errorf("LastApplied = %s, want %s", encode(got), want)
	}
	// Setting again (the object now carries the annotation) does not nest it.
	if err := SetLastApplied(obj, obj.Object); err != nil {
		t.Fatal(err)
	}
	if again, _ := annotationOf(t, obj); again != want {
		t.Errorf("annotation after second set = %s, want %s", again, want)
	}

	empty := &unstructured.Unstructured{}
	if err := SetLastApplied(empty, map[string]any{"data": map[string]any{"n": int64(1)}}); err != nil {
		t.Fatal(err)
	}
	if ann, _ := annotationOf(t, empty); ann != `{"data":{"n":1}}` {
		t.Errorf("annotation on empty object = %s", ann)
	}
	if err := SetLastApplied(nil, nil); err == nil {
		t.Error("SetLastApplied(nil): no error")
	}
	if err := SetLastApplied(empty, map[string]any{"x": make(chan int)}); err == nil {
		t.Error("SetLastApplied with a non-JSON value: no error")
	}
	if got, err := LastApplied(nil); got != nil || err != nil {
		t.Errorf("LastApplied(nil) = %v, %v", got, err)
	}
}

func TestLastAppliedDecodesNumbersAsUnstructured(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetAnnotations(map[string]string{LastAppliedAnnotation: `{"i":3,"f":1.5,"big":12345678901234567}`})
	got, err := LastApplied(obj)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["i"].(int64); !ok {
		t.Errorf("i is a %T, want int64", got["i"])
	}
	if _, ok := got["f"].(float64); !ok {
		t.Errorf("f is a %T, want float64", got["f"])
	}
	if got["big"] != int64(12345678901234567) {
		t.Errorf("big = %#v, want exact int64", got["big"])
	}
	if b, _ := json.Marshal(got); string(b) != `{"big":12345678901234567,"f":1.5,"i":3}` {
		t.Errorf("round trip = %s", b)
	}
}

func TestApplyEchoedAnnotationDoesNotClaimAnnotations(t *testing.T) {
	// The hook echoes the observed child back, annotation included. That
	// must not make "annotations" part of the last applied state, or a
	// later desired state without annotations would delete everyone's.
	observed := object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}`)
	res, _ := mustApply(t, observed, object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}`))
	echoed := res.DeepCopy()
	res, _ = mustApply(t, res, echoed)
	ann := res.GetAnnotations()
	ann["theirs"] = "x"
	res.SetAnnotations(ann)
	res, _ = mustApply(t, res, object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"2"}}`))
	if res.GetAnnotations()["theirs"] != "x" {
		t.Errorf("someone else's annotation deleted: %v", res.GetAnnotations())
	}
}
