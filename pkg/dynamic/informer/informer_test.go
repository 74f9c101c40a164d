package informer

import (
	"context"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(ns, name string, ownerUID string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("v1")
	obj.SetKind("ConfigMap")
	obj.SetNamespace(ns)
	obj.SetName(name)
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "someone"}})
	if ownerUID != "" {
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Thing", Name: "p", UID: types.UID("u-" + ownerUID), Controller: ptr.To(true)}})
	}
	return obj
}

func labelled(obj *unstructured.Unstructured, l map[string]string) *unstructured.Unstructured {
	obj.SetLabels(l)
	return obj
}

func newFactory(objs ...runtime.Object) *Factory {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configMapsGVR: "ConfigMapList"}, objs...)
	return NewFactory(dynamicListerWatcher(client), Options{})
}

// dynamicListerWatcher lists and watches through a (fake) dynamic client,
// turning its objects back into JSON and then into Objects.
func dynamicListerWatcher(client dynamic.Interface) ListerWatcherFunc {
	toObject := func(u *unstructured.Unstructured) (*Object, error) {
		data, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		return NewObject(data)
	}
	return func(gvr schema.GroupVersionResource) cache.ListerWatcher {
		return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				list, err := client.Resource(gvr).List(ctx, opts)
				if err != nil {
					return nil, err
				}
				out := &ObjectList{}
				out.ResourceVersion = list.GetResourceVersion()
				for i := range list.Items {
					o, err := toObject(&list.Items[i])
					if err != nil {
						return nil, err
					}
					out.Items = append(out.Items, *o)
				}
				return out, nil
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				w, err := client.Resource(gvr).Watch(ctx, opts)
				if err != nil {
					return nil, err
				}
				return watch.Filter(w, func(in watch.Event) (watch.Event, bool) {
					if u, ok := in.Object.(*unstructured.Unstructured); ok {
						o, err := toObject(u)
						if err != nil {
							return in, false
						}
						in.Object = o
					}
					return in, true
				}), nil
			},
		}, client)
	}
}

func waitSynced(t *testing.T, i *Informer) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return i.HasSynced(), nil
	}); err != nil {
		t.Fatal("informer never synced")
	}
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	sort.Strings(out)
	return out
}

func TestSharedAndReferenceCounted(t *testing.T) {
	f := newFactory()
	a := f.Acquire(configMapsGVR)
	b := f.Acquire(configMapsGVR)
	if a.shared != b.shared {
		t.Fatal("two acquisitions of one resource got different informers")
	}
	if got := runningInformers(f); got != 1 {
		t.Fatalf("running informers = %d, want 1", got)
	}
	a.Release()
	a.Release() // idempotent
	if got := runningInformers(f); got != 1 {
		t.Fatalf("after one release, running informers = %d, want 1", got)
	}
	select {
	case <-b.shared.stop:
		t.Fatal("informer stopped while a handle holds it")
	default:
	}
	b.Release()
	if got := runningInformers(f); got != 0 {
		t.Fatalf("after the last release, running informers = %d, want 0", got)
	}
	select {
	case <-b.shared.stop:
	default:
		t.Fatal("informer still running after the last release")
	}
	c := f.Acquire(configMapsGVR)
	defer c.Release()
	if c.shared == b.shared {
		t.Fatal("a stopped informer was handed out again")
	}
}

func TestIndexesAndTransform(t *testing.T) {
	f := newFactory(
		configMap("ns1", "owned-1", "p1"),
		configMap("ns1", "owned-2", "p1"),
		configMap("ns1", "other-owner", "p2"),
		labelled(configMap("ns1", "orphan-1", ""), map[string]string{"app": "a"}),
		configMap("ns2", "orphan-2", ""),
		configMap("ns2", "forged", "p1"), // a reference to p1 of ns1, from ns2
	)
	i := f.Acquire(configMapsGVR)
	defer i.Release()
	var added []string
	if err := i.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		added = append(added, obj.(*Object).GetName())
	}}); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, i)
	if len(added) != 6 {
		t.Errorf("handler saw %d initial adds, want 6", len(added))
	}
	if got, want := names(i.OwnedBy("ns1", "u-p1")), []string{"ns1/owned-1", "ns1/owned-2"}; !equal(got, want) {
		t.Errorf("OwnedBy(ns1) = %v, want %v (not the forged reference of ns2)", got, want)
	}
	if got, want := names(i.OwnedBy("", "u-p1")), []string{"ns1/owned-1", "ns1/owned-2", "ns2/forged"}; !equal(got, want) {
		t.Errorf("OwnedBy(a cluster-scoped owner) = %v, want %v", got, want)
	}
	if got, want := names(i.Orphans("ns1", nil)), []string{"ns1/orphan-1"}; !equal(got, want) {
		t.Errorf("Orphans(ns1) = %v, want %v", got, want)
	}
	if got, want := names(i.Orphans("", labels.SelectorFromSet(labels.Set{"app": "a"}))), []string{"ns1/orphan-1"}; !equal(got, want) {
		t.Errorf("Orphans(all, app=a) = %v, want %v", got, want)
	}
	if got := names(i.Orphans("", labels.SelectorFromSet(labels.Set{"absent": "label"}))); len(got) != 0 {
		t.Errorf("Orphans(all, a selector nothing matches) = %v", got)
	}
	if got, want := names(i.Orphans("", nil)), []string{"ns1/orphan-1", "ns2/orphan-2"}; !equal(got, want) {
		t.Errorf("Orphans(all) = %v, want %v", got, want)
	}
	obj, ok := i.Get("ns1", "owned-1")
	if !ok {
		t.Fatal("Get found nothing")
	}
	if obj.GetManagedFields() != nil {
		t.Error("managedFields kept in the cache")
	}
	if n := len(i.ListMeta("", nil)); n != 6 {
		t.Errorf("%d objects cached, want 6", n)
	}
}

// runningInformers returns the number of informers f runs.
func runningInformers(f *Factory) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
