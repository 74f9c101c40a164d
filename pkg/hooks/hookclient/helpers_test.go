/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// The fixtures below are those of pkg/hooks's and pkg/hooks/credentials's
// tests that the tests of the client use too.

const (
	loose  = v1alpha1.ResponseUnMarshallModeLoose
	strict = v1alpha1.ResponseUnMarshallModeStrict
)

const childCM = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`

func newObject(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName(name)
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

func sampleController() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": "things"},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": "ctl.example.com/v1", "resource": "things"},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://h/sync"}}},
		},
	}}
}

func hookWith(url string, configure func(w *v1alpha1.Webhook)) *v1alpha1.Hook {
	h := urlHook(url)
	if configure != nil {
		configure(h.Webhook)
	}
	return h
}
