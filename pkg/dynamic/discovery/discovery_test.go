package discovery

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

func fakeServer() *fakediscovery.FakeDiscovery {
	return &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "namespaces", Kind: "Namespace"},
			{Name: "namespaces/status", Kind: "Namespace"},
		}},
		{GroupVersion: "ctl.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "things", Kind: "Thing", Namespaced: true},
			{Name: "things/status", Kind: "Thing", Namespaced: true},
		}},
	}}}
}

func TestLookups(t *testing.T) {
	ctx := context.Background()
	m := NewResourceMap(fakeServer(), Options{})
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	thing, err := m.Get(ctx, "ctl.example.com/v1", "things")
	if err != nil {
		t.Fatal(err)
	}
	if thing.Kind != "Thing" || !thing.Namespaced || !thing.HasStatus || thing.GroupVersionResource().Group != "ctl.example.com" {
		t.Errorf("things = %+v", thing)
	}
	cm, err := m.GetKind(ctx, "v1", "ConfigMap")
	if err != nil || cm.Name != "configmaps" || cm.HasStatus {
		t.Errorf("GetKind(ConfigMap) = %+v, %v", cm, err)
	}
	ns, err := m.Get(ctx, "v1", "namespaces")
	if err != nil || ns.Namespaced || !ns.HasStatus {
		t.Errorf("namespaces = %+v, %v", ns, err)
	}
	if _, err := m.Get(ctx, "v1", "nothings"); !IsNotFound(err) {
		t.Errorf("unknown resource: err = %v, want NotFound", err)
	}
	if res, ok := m.Cached(thing.GroupVersionResource()); !ok || res != thing {
		t.Errorf("Cached(things) = %+v, %v", res, ok)
	}
	if res, ok := m.Cached(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}); !ok || !res.Namespaced {
		t.Errorf("Cached(configmaps) = %+v, %v", res, ok)
	}
	if _, ok := m.Cached(schema.GroupVersionResource{Version: "v1", Resource: "nothings"}); ok {
		t.Error("Cached found an unknown resource")
	}
}

func TestMissRefreshesAndSubscribersHearOfChanges(t *testing.T) {
	ctx := context.Background()
	server := fakeServer()
	m := NewResourceMap(server, Options{MinRefreshInterval: 1})
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	var told atomic.Int32
	m.Subscribe(func() { told.Add(1) })

	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if told.Load() != 0 {
		t.Error("subscriber told of a refresh that changed nothing")
	}
	// A CRD appears: the next lookup's miss refreshes and finds it.
	server.Resources = append(server.Resources, &metav1.APIResourceList{GroupVersion: "new.example.com/v1",
		APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Namespaced: true}}})
	if _, err := m.Get(ctx, "new.example.com/v1", "widgets"); err != nil {
		t.Fatalf("lookup after the resource appeared: %v", err)
	}
	if told.Load() != 1 {
		t.Errorf("subscriber told %d times, want once", told.Load())
	}
}
