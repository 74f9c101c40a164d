/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"bytes"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// ObjectMap holds the observed objects of a hook request ("children",
// "attachments", "related"). The outer key names the type of the objects
// (see GroupVersionKindKey), the inner key names one object (see ObjectKey).
//
// Build one with NewObjectMap, EnsureKey and Insert. An ObjectMap, and every
// inner map in it, encodes as a JSON object, never as null: a resource
// without objects is sent as {}.
type ObjectMap map[string]map[string]*unstructured.Unstructured

// NewObjectMap returns an empty ObjectMap.
func NewObjectMap() ObjectMap {
	return ObjectMap{}
}

// GroupVersionKindKey returns the outer key of an ObjectMap for objects of
// apiVersion and kind: "<Kind>.<version>" for the core group ("ConfigMap.v1")
// and "<Kind>.<group>/<version>" otherwise ("Deployment.apps/v1").
func GroupVersionKindKey(apiVersion, kind string) string {
	// apiVersion is "<version>" for the core group and "<group>/<version>"
	// otherwise, so both forms are the kind, a dot and the apiVersion.
	return kind + "." + apiVersion
}

// ObjectKey returns the inner key of obj in an ObjectMap of a hook request
// whose parent (or decorated object) is namespaced when parentNamespaced is
// true.
//
// Version v2 keys every namespaced object by "namespace/name" and every
// cluster-scoped object by "name". Version v1 (and any other value) keys an
// object by "name" unless the parent is cluster-scoped and the object is
// namespaced, in which case the key is "namespace/name".
//
// An object is namespaced when its metadata.namespace is not empty.
func ObjectKey(version v1alpha1.HookVersion, parentNamespaced bool, obj *unstructured.Unstructured) string {
	ns := obj.GetNamespace()
	if ns == "" {
		return obj.GetName()
	}
	if version == v1alpha1.HookVersionV2 || !parentNamespaced {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// EnsureKey makes sure m has an entry for objects of apiVersion and kind,
// so that the resource is sent even when it has no objects, and returns
// that entry. m must not be nil.
func (m ObjectMap) EnsureKey(apiVersion, kind string) map[string]*unstructured.Unstructured {
	key := GroupVersionKindKey(apiVersion, kind)
	inner := m[key]
	if inner == nil {
		inner = make(map[string]*unstructured.Unstructured)
		m[key] = inner
	}
	return inner
}

// Insert adds obj to m under the keys of its apiVersion and kind and of
// ObjectKey(version, parentNamespaced, obj), replacing an object already
// there under the same keys. m must not be nil.
func (m ObjectMap) Insert(version v1alpha1.HookVersion, parentNamespaced bool, obj *unstructured.Unstructured) {
	m.EnsureKey(obj.GetAPIVersion(), obj.GetKind())[ObjectKey(version, parentNamespaced, obj)] = obj
}

// Rekeyed returns a new ObjectMap of m's objects keyed as Insert keys
// them for a hook of version (the same entries, empty ones included).
func (m ObjectMap) Rekeyed(version v1alpha1.HookVersion, parentNamespaced bool) ObjectMap {
	out := make(ObjectMap, len(m))
	for key, inner := range m {
		objs := make(map[string]*unstructured.Unstructured, len(inner))
		for _, obj := range inner {
			objs[ObjectKey(version, parentNamespaced, obj)] = obj
		}
		out[key] = objs
	}
	return out
}

// ObjectMapOf returns the ObjectMap of a request's observed objects: an
// entry for each of resources, even one without objects, holding its
// objects in observed, keyed as Insert keys them.
func ObjectMapOf[R interface {
	comparable
	GroupVersionKind() schema.GroupVersionKind
}, S ~map[string]*unstructured.Unstructured](version v1alpha1.HookVersion, parentNamespaced bool, resources []R, observed map[R]S) ObjectMap {
	m := make(ObjectMap, len(resources))
	for _, res := range resources {
		m.EnsureKey(res.GroupVersionKind().ToAPIVersionAndKind())
		for _, obj := range observed[res] {
			m.Insert(version, parentNamespaced, obj)
		}
	}
	return m
}

// MarshalJSON encodes m with sorted keys; a nil ObjectMap and nil inner maps
// encode as {}.
func (m ObjectMap) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	e := newEncoder(&buf)
	if err := e.objectMap(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// objectMap writes m as JSON with sorted keys.
func (e *encoder) objectMap(m ObjectMap) error {
	e.buf.WriteByte('{')
	start, end := pushSortedKeys(e, m)
	for i := start; i < end; i++ {
		if i > start {
			e.buf.WriteByte(',')
		}
		gvk := e.keys[i]
		e.string(gvk)
		e.buf.WriteByte(':')
		inner := m[gvk]
		e.buf.WriteByte('{')
		istart, iend := pushSortedKeys(e, inner)
		for j := istart; j < iend; j++ {
			if j > istart {
				e.buf.WriteByte(',')
			}
			name := e.keys[j]
			e.string(name)
			e.buf.WriteByte(':')
			if err := e.object(inner[name]); err != nil {
				return err
			}
		}
		e.popKeys(istart, iend)
		e.buf.WriteByte('}')
	}
	e.popKeys(start, end)
	e.buf.WriteByte('}')
	return nil
}
