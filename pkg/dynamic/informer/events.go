package informer

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// ObjectOf returns the object of an event, unwrapping the tombstone a
// delete event may carry; nil when it is not a cached Object.
func ObjectOf(obj any) *Object {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, _ := obj.(*Object)
	return o
}

// OnlyStatusChanged reports whether two versions of an object differ in
// nothing but status and the metadata the server bumps on any write
// (resourceVersion, managedFields). Objects that do not decode count as
// changed.
func OnlyStatusChanged(oldObject, newObject *Object) bool {
	if !equalExcept(metaMap(oldObject), metaMap(newObject), "resourceVersion", "managedFields") {
		return false
	}
	oldObj, err1 := oldObject.Unstructured()
	newObj, err2 := newObject.Unstructured()
	if err1 != nil || err2 != nil {
		return false
	}
	return onlyStatusChanged(oldObj, newObj)
}

// metaMap is o's metadata as a map, for comparisons.
func metaMap(o *Object) map[string]any {
	m, _ := o.metadata()
	return m
}

func onlyStatusChanged(oldObj, newObj *unstructured.Unstructured) bool {
	if len(oldObj.Object) != len(newObj.Object) {
		return false
	}
	for k, v := range newObj.Object {
		switch k {
		case "status":
		case "metadata":
			oldMD, _ := oldObj.Object["metadata"].(map[string]any)
			newMD, _ := v.(map[string]any)
			if !equalExcept(oldMD, newMD, "resourceVersion", "managedFields") {
				return false
			}
		default:
			if !reflect.DeepEqual(oldObj.Object[k], v) {
				return false
			}
		}
	}
	return true
}

// equalExcept compares two maps ignoring the given keys.
func equalExcept(a, b map[string]any, ignore ...string) bool {
	skip := func(k string) bool {
		for _, i := range ignore {
			if k == i {
				return true
			}
		}
		return false
	}
	for k, v := range a {
		if skip(k) {
			continue
		}
		if w, ok := b[k]; !ok || !reflect.DeepEqual(v, w) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !skip(k) {
			return false
		}
	}
	return true
}
