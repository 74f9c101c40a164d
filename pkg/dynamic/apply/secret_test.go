package apply

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestSecretStringDataAppliesOnceAndIsNotRecordedInClear(t *testing.T) {
	desired := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "s", "namespace": "ns"},
		"stringData": map[string]any{"password": "hunter2"},
	}}
	created := desired.DeepCopy()
	if err := SetLastApplied(created, desired.Object); err != nil {
		t.Fatal(err)
	}
	annotation := created.GetAnnotations()[LastAppliedAnnotation]
	if strings.Contains(annotation, "hunter2") || strings.Contains(annotation, "aHVudGVyMg") {
		t.Fatalf("the last-applied annotation holds the secret: %s", annotation)
	}
	if !strings.Contains(annotation, `"password":"sha256:`) {
		t.Fatalf("the last-applied annotation does not name the key: %s", annotation)
	}
	// What the server stores: stringData folded into data.
	observed := created.DeepCopy()
	delete(observed.Object, "stringData")
	observed.Object["data"] = map[string]any{"password": "aHVudGVyMg=="}
	observed.SetResourceVersion("1")

	result, changed, err := Apply(observed, desired)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Fatalf("applying the same stringData again changes the Secret: %v", result.Object)
	}
	if _, ok := desired.Object["data"]; ok {
		t.Error("Apply modified desired")
	}

	desired.Object["stringData"] = map[string]any{"password": "changed"}
	result, changed, err = Apply(observed, desired)
	if err != nil || !changed {
		t.Fatalf("a changed secret value: changed=%v err=%v", changed, err)
	}
	if got := result.Object["data"].(map[string]any)["password"]; got != "Y2hhbmdlZA==" {
		t.Errorf("data.password = %v", got)
	}
	if strings.Contains(result.GetAnnotations()[LastAppliedAnnotation], "changed") {
		t.Error("the updated annotation holds the secret")
	}
}
