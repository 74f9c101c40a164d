/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var newObject = hookfixture.NewObject

func TestGroupVersionKindKey(t *testing.T) {
	for _, tc := range []struct{ apiVersion, kind, want string }{
		{"v1", "ConfigMap", "ConfigMap.v1"},
		{"apps/v1", "Deployment", "Deployment.apps/v1"},
		{"ctl.example.com/v1", "Thing", "Thing.ctl.example.com/v1"},
	} {
		if got := GroupVersionKindKey(tc.apiVersion, tc.kind); got != tc.want {
			t.Errorf("GroupVersionKindKey(%q, %q) = %q, want %q", tc.apiVersion, tc.kind, got, tc.want)
		}
	}
}

func TestObjectKey(t *testing.T) {
	namespaced := newObject("v1", "ConfigMap", "ns-a", "cm")
	cluster := newObject("rbac.authorization.k8s.io/v1", "ClusterRole", "", "role")
	for _, tc := range []struct {
		name             string
		version          v1alpha1.HookVersion
		parentNamespaced bool
		obj              *unstructured.Unstructured
		want             string
	}{
		{"v1 namespaced parent, namespaced child", v1alpha1.HookVersionV1, true, namespaced, "cm"},
		{"v2 namespaced parent, namespaced child", v1alpha1.HookVersionV2, true, namespaced, "ns-a/cm"},
		{"v1 cluster parent, namespaced child", v1alpha1.HookVersionV1, false, namespaced, "ns-a/cm"},
		{"v2 cluster parent, namespaced child", v1alpha1.HookVersionV2, false, namespaced, "ns-a/cm"},
		{"v1 cluster parent, cluster child", v1alpha1.HookVersionV1, false, cluster, "role"},
		{"v2 cluster parent, cluster child", v1alpha1.HookVersionV2, false, cluster, "role"},
		{"v1 namespaced parent, cluster child", v1alpha1.HookVersionV1, true, cluster, "role"},
		{"v2 namespaced parent, cluster child", v1alpha1.HookVersionV2, true, cluster, "role"},
		{"unset version is v1", "", true, namespaced, "cm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ObjectKey(tc.version, tc.parentNamespaced, tc.obj); got != tc.want {
				t.Errorf("ObjectKey = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestObjectMapJSON(t *testing.T) {
	m := NewObjectMap()
	m.EnsureKey("v1", "Pod")
	m.EnsureKey("v1", "ConfigMap")
	m.Insert(v1alpha1.HookVersionV2, true, newObject("v1", "ConfigMap", "ns", "b"))
	m.Insert(v1alpha1.HookVersionV2, true, newObject("v1", "ConfigMap", "ns", "a"))
	m.Insert(v1alpha1.HookVersionV2, true, newObject("ctl.example.com/v1", "Thing", "ns", "t"))
	m["Secret.v1"] = nil // a nil inner map must still be {}

	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ConfigMap.v1":{` +
		`"ns/a":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}},` +
		`"ns/b":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"ns"}}},` +
		`"Pod.v1":{},"Secret.v1":{},` +
		`"Thing.ctl.example.com/v1":{"ns/t":{"apiVersion":"ctl.example.com/v1","kind":"Thing","metadata":{"name":"t","namespace":"ns"}}}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	// EnsureKey keeps objects already there.
	m.EnsureKey("v1", "ConfigMap")
	if len(m["ConfigMap.v1"]) != 2 {
		t.Errorf("EnsureKey dropped objects: %v", m["ConfigMap.v1"])
	}

	var nilMap ObjectMap
	got, err = json.Marshal(nilMap)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "{}" {
		t.Errorf("nil ObjectMap = %s, want {}", got)
	}
}

func TestObjectMapEscapesKeys(t *testing.T) {
	m := NewObjectMap()
	m.EnsureKey("v1", "ConfigMap")["we<ird\"\u00e9"] = nil
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]map[string]any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if diff := cmp.Diff(map[string]map[string]any{"ConfigMap.v1": {"we<ird\"\u00e9": nil}}, back); diff != "" {
		t.Error(diff)
	}
	// Same escaping as encoding/json.
	plain, _ := json.Marshal(map[string]map[string]any{"ConfigMap.v1": {"we<ird\"\u00e9": nil}})
	if string(got) != string(plain) {
		t.Errorf("got %s, encoding/json gives %s", got, plain)
	}
}

// resource is a declared resource for ObjectMapOf.
type resource struct{ apiVersion, kind string }

func (r *resource) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.apiVersion, r.kind)
}

func TestObjectMapOf(t *testing.T) {
	configMaps, things, pods := &resource{"v1", "ConfigMap"}, &resource{"ctl.example.com/v1", "Thing"}, &resource{"v1", "Pod"}
	cm := newObject("v1", "ConfigMap", "ns", "a")
	thing := newObject("ctl.example.com/v1", "Thing", "ns", "t")
	undeclared := newObject("v1", "Secret", "ns", "s")
	observed := map[*resource]map[string]*unstructured.Unstructured{
		configMaps: {"ns/a": cm},
		things:     {"ns/t": thing},
		// Objects of a resource that is not declared are not sent.
		{"v1", "Secret"}: {"ns/s": undeclared},
	}
	got := ObjectMapOf(v1alpha1.HookVersionV1, true, []*resource{configMaps, things, pods}, observed)
	want := ObjectMap{
		"ConfigMap.v1":             {"a": cm},
		"Thing.ctl.example.com/v1": {"t": thing},
		"Pod.v1":                   {}, // declared, no objects: still sent
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ObjectMapOf (-want +got):\n%s", diff)
	}
}
