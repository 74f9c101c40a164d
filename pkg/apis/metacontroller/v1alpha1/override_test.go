package v1alpha1

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func overrideController(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: c}
spec:
  endpointConfigs:
  - host: 127.0.0.1:8080
    authorization: {credentials: {secretRef: {name: local, namespace: ns}}}
  - host: hooks.example.com
    authorization: {credentials: {secretRef: {name: remote, namespace: ns}}}
  hooks:
    sync:
      webhook: {url: "https://hooks.example.com/hello/sync", timeout: 5s, etag: {enabled: true}}
    finalize:
      webhook: {service: {name: svc, namespace: ns}, path: /fin, basicAuth: {secretRef: {name: b, namespace: ns}}}
    customize:
      webhook: {url: "https://hooks.example.com/hello/customize"}
`), &obj); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func webhookOf(t *testing.T, obj *unstructured.Unstructured, hook string) map[string]any {
	t.Helper()
	w, _, err := unstructured.NestedMap(obj.Object, "spec", "hooks", hook, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestOverrideHookURLs: a URL without a path keeps each hook's own path;
// the customize hook, without its own URL, is called at --hook-url's host
// with its own path; hooks overridden carry no credentials, not even an
// endpointConfigs entry matching their new host; a hook left alone keeps
// the entry that applied to it.
func TestOverrideHookURLs(t *testing.T) {
	in := overrideController(t)
	out, err := OverrideHookURLs(in, "http://127.0.0.1:8080", "")
	if err != nil {
		t.Fatal(err)
	}
	for hook, want := range map[string]map[string]any{
		"sync":      {"url": "http://127.0.0.1:8080/hello/sync", "timeout": "5s", "etag": map[string]any{"enabled": true}},
		"finalize":  {"url": "http://127.0.0.1:8080/fin"},
		"customize": {"url": "http://127.0.0.1:8080/hello/customize"},
	} {
		if got := webhookOf(t, out, hook); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", hook, got, want)
		}
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(out.Object, "spec", "endpointConfigs"); found {
		t.Error("spec.endpointConfigs kept: an overridden hook would take the entry of its new host")
	}
	if w := webhookOf(t, in, "sync"); w["url"] != "https://hooks.example.com/hello/sync" {
		t.Errorf("the input was changed: %v", w)
	}

	// Only the customize hook overridden, with a path: it is used as is;
	// the sync hook keeps the credentials of its endpointConfigs entry.
	out, err = OverrideHookURLs(in, "", "http://127.0.0.1:9090/c")
	if err != nil {
		t.Fatal(err)
	}
	if w := webhookOf(t, out, "customize"); !reflect.DeepEqual(w, map[string]any{"url": "http://127.0.0.1:9090/c"}) {
		t.Errorf("customize: %v", w)
	}
	sync := webhookOf(t, out, "sync")
	if name, _, _ := unstructured.NestedString(sync, "authorization", "credentials", "secretRef", "name"); name != "remote" || sync["url"] != "https://hooks.example.com/hello/sync" {
		t.Errorf("sync left alone lost its endpointConfigs credentials: %v", sync)
	}
	if name, _, _ := unstructured.NestedString(webhookOf(t, out, "finalize"), "basicAuth", "secretRef", "name"); name != "b" {
		t.Errorf("finalize left alone lost its own credentials: %v", webhookOf(t, out, "finalize"))
	}

	// A full URL is used as it is, for sync and finalize alike.
	out, err = OverrideHookURLs(in, "http://127.0.0.1:8080/x", "")
	if err != nil {
		t.Fatal(err)
	}
	if s, f, c := webhookOf(t, out, "sync")["url"], webhookOf(t, out, "finalize")["url"], webhookOf(t, out, "customize")["url"]; s != "http://127.0.0.1:8080/x" || f != s || c != "http://127.0.0.1:8080/hello/customize" {
		t.Errorf("sync %v, finalize %v, customize %v", s, f, c)
	}

	for _, bad := range []string{"127.0.0.1:8080", "ftp://h/x", "/sync", "http://"} {
		if _, err := OverrideHookURLs(in, bad, ""); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
