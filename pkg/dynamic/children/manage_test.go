//go:build integration

package children_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// manageFixture is a Writer against the test's API server, a parent, and
// the ConfigMap resource with a given update method.
type manageFixture struct {
	t        *testing.T
	ctx      context.Context
	ns       string
	writer   *children.Writer
	recorder *record.FakeRecorder
	parent   *unstructured.Unstructured
	res      *children.Resource
}

func newManageFixture(t *testing.T, method v1alpha1.ChildUpdateMethod) *manageFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	resources := discovery.NewResourceMap(env.Kube.Discovery(), discovery.Options{})
	cms, err := resources.Get(ctx, "v1", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	objects, err := objectclient.New(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.CreateNamespace(t)
	parent, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "parent"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(10)
	return &manageFixture{t: t, ctx: ctx, ns: ns, recorder: recorder, parent: parent,
		writer: &children.Writer{Objects: objects, Controller: "manage-test", Recorder: recorder},
		res:    &children.Resource{Resource: cms, Method: method}}
}

// want is a desired child ConfigMap name with data value, owned by the
// parent.
func (f *manageFixture) want(name, value string) *unstructured.Unstructured {
	child := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": f.ns},
		"data":     map[string]any{"value": value},
	}}
	child.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(f.parent, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	return child
}

func (f *manageFixture) set(objs ...*unstructured.Unstructured) map[*children.Resource]children.Set {
	return setOf(f.res, objs...)
}

// setOf returns objs as the children of res, keyed as children.Key keys them.
func setOf(res *children.Resource, objs ...*unstructured.Unstructured) map[*children.Resource]children.Set {
	set := children.Set{}
	for _, o := range objs {
		set[children.Key(o)] = o
	}
	return map[*children.Resource]children.Set{res: set}
}

func (f *manageFixture) manage(observed, desired map[*children.Resource]children.Set) *children.Result {
	f.t.Helper()
	result, err := f.writer.Manage(f.ctx, f.parent, []*children.Resource{f.res}, observed, desired)
	if err != nil {
		f.t.Fatalf("Manage: %v", err)
	}
	return result
}

// get returns the child as the server has it, nil when there is none.
func (f *manageFixture) get(name string) *unstructured.Unstructured {
	f.t.Helper()
	obj, err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	obj.SetManagedFields(nil)
	return obj
}

func value(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, "data", "value")
	return v
}

// TestManageCreatesAndDeletes: a desired child missing is created with its
// last-applied state; an observed child not desired is deleted; Result
// says so and its Observed follows the writes.
func TestManageCreatesAndDeletes(t *testing.T) {
	f := newManageFixture(t, v1alpha1.ChildUpdateInPlace)
	result := f.manage(f.set(), f.set(f.want("a", "1"), f.want("b", "1")))
	if len(result.Written) != 2 || result.Deleted != 0 || !result.Wrote() {
		t.Fatalf("creating two: Written %d, Deleted %d", len(result.Written), result.Deleted)
	}
	a, b := f.get("a"), f.get("b")
	if a == nil || b == nil || value(a) != "1" {
		t.Fatalf("created a=%v b=%v", a, b)
	}
	if _, ok := a.GetAnnotations()[apply.LastAppliedAnnotation]; !ok {
		t.Error("a created child has no last-applied annotation")
	}
	if got := result.Observed[f.res][f.ns+"/a"]; got == nil || got.GetUID() != a.GetUID() {
		t.Errorf("Result.Observed lacks the created child a: %v", got)
	}

	result = f.manage(f.set(a, b), f.set(f.want("a", "1")))
	if result.Deleted != 1 || len(result.Written) != 0 {
		t.Errorf("deleting one: Written %d, Deleted %d", len(result.Written), result.Deleted)
	}
	if _, ok := result.Observed[f.res][f.ns+"/b"]; ok {
		t.Error("Result.Observed still holds the deleted child b")
	}
	if got := f.get("b"); got != nil && got.GetDeletionTimestamp() == nil {
		t.Error("b was not deleted")
	}
	if f.get("a") == nil {
		t.Error("a, still desired, is gone")
	}

	// Nothing to do: no write at all.
	a = f.get("a")
	if result := f.manage(f.set(a), f.set(f.want("a", "1"))); result.Wrote() {
		t.Errorf("an unchanged child was written: %+v", result)
	}
}

// TestManageUpdatesPerMethod: a child that differs from the desired one is
// updated in place (InPlace), deleted to be created again (Recreate), or
// left as it is with a ChildNotUpdated Event (OnDelete).
func TestManageUpdatesPerMethod(t *testing.T) {
	for _, method := range []v1alpha1.ChildUpdateMethod{v1alpha1.ChildUpdateInPlace, v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateOnDelete} {
		t.Run(string(method), func(t *testing.T) {
			f := newManageFixture(t, method)
			f.manage(f.set(), f.set(f.want("a", "old")))
			before := f.get("a")
			result := f.manage(f.set(before), f.set(f.want("a", "new")))
			after := f.get("a")
			switch method {
			case v1alpha1.ChildUpdateInPlace:
				if after == nil || after.GetUID() != before.GetUID() || value(after) != "new" {
					t.Errorf("InPlace: child %v, want the same object with value new", after)
				}
				if len(result.Written) != 1 || result.Deleted != 0 {
					t.Errorf("InPlace: Written %d, Deleted %d", len(result.Written), result.Deleted)
				}
			case v1alpha1.ChildUpdateRecreate:
				if after != nil && after.GetDeletionTimestamp() == nil {
					t.Errorf("Recreate: child %s still there, want it deleted (to be created again by a later call)", value(after))
				}
				if len(result.Written) != 0 || result.Deleted != 1 {
					t.Errorf("Recreate: Written %d, Deleted %d", len(result.Written), result.Deleted)
				}
			case v1alpha1.ChildUpdateOnDelete:
				if after == nil || after.GetResourceVersion() != before.GetResourceVersion() {
					t.Errorf("OnDelete: the child was written")
				}
				if result.Wrote() {
					t.Errorf("OnDelete: Written %d, Deleted %d", len(result.Written), result.Deleted)
				}
				select {
				case e := <-f.recorder.Events:
					if !strings.Contains(e, children.ReasonChildNotUpdated) {
						t.Errorf("OnDelete: Event %q, want %s", e, children.ReasonChildNotUpdated)
					}
				default:
					t.Errorf("OnDelete: no %s Event", children.ReasonChildNotUpdated)
				}
			}
		})
	}
}

// TestManageDeletesOnlyTheObservedObject: a delete carries the observed
// UID as a precondition: when the child was replaced by another object of
// its name meanwhile, the new one is kept, and that is no error.
func TestManageDeletesOnlyTheObservedObject(t *testing.T) {
	f := newManageFixture(t, v1alpha1.ChildUpdateInPlace)
	f.manage(f.set(), f.set(f.want("a", "1")))
	stale := f.get("a")
	if err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Delete(f.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replacement, err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Create(f.ctx, f.want("a", "someone else's"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	result := f.manage(f.set(stale), f.set())
	if got := f.get("a"); got == nil || got.GetUID() != replacement.GetUID() {
		t.Errorf("the replacement was deleted on the stale child's account")
	}
	if result.Deleted != 1 {
		t.Errorf("Deleted %d, want the stale child counted as deleted", result.Deleted)
	}
}

// TestManageCreateOfAnExistingChild: a create that finds the name taken
// (by another owner, or a child not yet in the cache) is no error and
// writes nothing.
func TestManageCreateOfAnExistingChild(t *testing.T) {
	f := newManageFixture(t, v1alpha1.ChildUpdateInPlace)
	existing, err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Create(f.ctx, f.want("a", "theirs"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	result := f.manage(f.set(), f.set(f.want("a", "mine")))
	if result.Wrote() {
		t.Errorf("Written %d, Deleted %d, want nothing", len(result.Written), result.Deleted)
	}
	if got := f.get("a"); got == nil || got.GetResourceVersion() != existing.GetResourceVersion() {
		t.Error("the existing object was changed")
	}
}

// TestManageRecreateKeepsAPodTheServerDefaulted: a Recreate Pod child
// whose hook sets a toleration gets the server's default tolerations too
// (admission's DefaultTolerationSeconds); a later Manage with the same
// desired Pod neither deletes nor writes it (metacontroller issue #863:
// it recreates such a child forever), and a changed desired Pod is still
// recreated.
func TestManageRecreateKeepsAPodTheServerDefaulted(t *testing.T) {
	f := newManageFixture(t, v1alpha1.ChildUpdateRecreate)
	pods, err := discovery.NewResourceMap(env.Kube.Discovery(), discovery.Options{}).Get(f.ctx, "v1", "pods")
	if err != nil {
		t.Fatal(err)
	}
	f.res = &children.Resource{Resource: pods, Method: v1alpha1.ChildUpdateRecreate}
	pod := func(image string) *unstructured.Unstructured {
		child := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": f.ns},
			"spec": map[string]any{
				"containers":  []any{map[string]any{"name": "c", "image": image}},
				"tolerations": []any{map[string]any{"key": "mine", "operator": "Exists", "effect": "NoSchedule"}},
			},
		}}
		child.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(f.parent, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
		return child
	}
	f.manage(f.set(), f.set(pod("img:1")))
	created, err := env.Dynamic.Resource(pods.GroupVersionResource()).Namespace(f.ns).Get(f.ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tolerations, _, _ := unstructured.NestedSlice(created.Object, "spec", "tolerations")
	if len(tolerations) < 2 {
		t.Fatalf("the server added no toleration (%v): the test needs admission's DefaultTolerationSeconds", tolerations)
	}
	if result := f.manage(f.set(created), f.set(pod("img:1"))); result.Wrote() {
		t.Errorf("the same desired Pod: Written %d, Deleted %d; want no write", len(result.Written), result.Deleted)
	}
	if result := f.manage(f.set(created), f.set(pod("img:2"))); result.Deleted != 1 {
		t.Errorf("a changed desired Pod: Deleted %d, want it recreated", result.Deleted)
	}
}

// TestManageUpdateOfAChildGoneMeanwhile: an update that finds the child
// deleted since it was observed is no error, as in metacontroller, and
// writes nothing; the child is no longer observed.
func TestManageUpdateOfAChildGoneMeanwhile(t *testing.T) {
	f := newManageFixture(t, v1alpha1.ChildUpdateInPlace)
	f.manage(f.set(), f.set(f.want("a", "old")))
	stale := f.get("a")
	if err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Delete(f.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	result := f.manage(f.set(stale), f.set(f.want("a", "new")))
	if result.Wrote() || f.get("a") != nil {
		t.Errorf("Written %d, Deleted %d, stored %v; want nothing written", len(result.Written), result.Deleted, f.get("a"))
	}
	if _, ok := result.Observed[f.res][f.ns+"/a"]; ok {
		t.Error("Result.Observed still holds the child that is gone")
	}
}
