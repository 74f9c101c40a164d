// Package inmemory holds what a test of a reconciler rule needs of a
// cluster, in memory, so that it runs without an API server: the
// discovery of given resources (Resources) and informers over given
// objects (Informer, Informers), with the real indexes and lookups of
// pkg/dynamic/discovery and pkg/dynamic/informer. Writes go to client-go's
// fake dynamic client (k8s.io/client-go/dynamic/fake).
package inmemory

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// Resources returns a ResourceMap, already refreshed, that knows the
// resources of lists as a server serving them would report them.
func Resources(t testing.TB, lists ...*metav1.APIResourceList) *discovery.ResourceMap {
	t.Helper()
	m := discovery.NewResourceMap(&fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: lists}}, discovery.Options{})
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatalf("discovery of %d in-memory resource lists: %v", len(lists), err)
	}
	return m
}

// Object returns an object of kind in namespace ("" for none) named name,
// with labels and annotations, resourceVersion 1 and UID
// uid-<namespace>/<name>, as a test puts it in a cache or a fake client.
func Object(apiVersion, kind, namespace, name string, labels, annotations map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetUID(types.UID("uid-" + namespace + "/" + name))
	obj.SetResourceVersion("1")
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	return obj
}

// Informer returns a synced informer of gvr whose cache holds objs: listed
// once, its watch reports no change. It is released when the test ends.
func Informer(t testing.TB, gvr schema.GroupVersionResource, objs ...*unstructured.Unstructured) *informer.Informer {
	t.Helper()
	if _, err := fixed(objs).List(metav1.ListOptions{}); err != nil {
		t.Fatalf("the in-memory informer of %s cannot list its objects: %v", gvr, err)
	}
	i := Informers(map[schema.GroupVersionResource][]*unstructured.Unstructured{gvr: objs}).Acquire(gvr)
	t.Cleanup(i.Release)
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return i.HasSynced(), nil
	})
	if err != nil {
		t.Fatalf("the in-memory informer of %s did not sync: %v", gvr, err)
	}
	return i
}

// Informers returns a Factory whose informer of a resource holds the
// objects objs has for it: listed once, its watch reports no change.
func Informers(objs map[schema.GroupVersionResource][]*unstructured.Unstructured) *informer.Factory {
	return informer.NewFactory(func(gvr schema.GroupVersionResource) cache.ListerWatcher { return fixed(objs[gvr]) }, informer.Options{})
}

// fixed lists its objects, as the API server's JSON would carry them, and
// watches nothing.
type fixed []*unstructured.Unstructured

func (f fixed) List(metav1.ListOptions) (runtime.Object, error) {
	list := &informer.ObjectList{}
	list.ResourceVersion = "1"
	for _, u := range f {
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		o, err := informer.NewObject(data)
		if err != nil {
			return nil, fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		list.Items = append(list.Items, *o)
	}
	return list, nil
}

func (fixed) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// IsWatchListSemanticsUnSupported tells the reflector to List, then Watch.
func (fixed) IsWatchListSemanticsUnSupported() bool { return true }
