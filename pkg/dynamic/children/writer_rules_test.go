package children

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// The fast tests of Writer.Manage (no API server): its writes go to
// internal/inmemory's store, which answers as kube-apiserver does in what
// Manage relies on (resourceVersions, UIDs, preconditions, finalizers).
// Their twins against kube-apiserver are manage_test.go and
// serverside_test.go (tagged).

var writerConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// writerFixture is a Writer over a store, a parent ConfigMap ns/parent and
// the resource configmaps updated by a method.
type writerFixture struct {
	t        *testing.T
	objects  *inmemory.Objects
	recorder *record.FakeRecorder
	writer   *Writer
	parent   *unstructured.Unstructured
	res      *Resource
}

func newWriterFixture(t *testing.T, method v1alpha1.ChildUpdateMethod, objs ...*unstructured.Unstructured) *writerFixture {
	parent := inmemory.Object("v1", "ConfigMap", "ns", "parent", nil, nil)
	objects := inmemory.NewObjects(nil, append(objs, parent)...)
	recorder := record.NewFakeRecorder(10)
	return &writerFixture{t: t, objects: objects, recorder: recorder, parent: parent,
		writer: &Writer{Objects: objects, Controller: "writer-test", Recorder: recorder},
		res: &Resource{Resource: &discovery.Resource{APIVersion: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			Method: method}}
}

// want is a desired child ConfigMap ns/<name> with data.value, owned by
// the parent.
func (f *writerFixture) want(name, value string) *unstructured.Unstructured {
	child := inmemory.Object("v1", "ConfigMap", "ns", name, nil, nil)
	child.SetUID("")
	child.SetResourceVersion("")
	child.Object["data"] = map[string]any{"value": value}
	child.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(f.parent, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	return child
}

// set returns objs as the children of the fixture's resource.
func (f *writerFixture) set(objs ...*unstructured.Unstructured) map[*Resource]Set {
	set := Set{}
	for _, o := range objs {
		set[Key(o)] = o
	}
	return map[*Resource]Set{f.res: set}
}

func (f *writerFixture) manage(observed, desired map[*Resource]Set) *Result {
	f.t.Helper()
	result, err := f.writer.Manage(f.t.Context(), f.parent, []*Resource{f.res}, observed, desired)
	if err != nil {
		f.t.Fatalf("Manage: %v", err)
	}
	return result
}

// get returns the stored child ns/<name>, nil when there is none.
func (f *writerFixture) get(name string) *unstructured.Unstructured {
	obj, _ := f.objects.Get(writerConfigMaps, "ns", name)
	return obj
}

func dataValue(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, "data", "value")
	return v
}

// TestWriterCreatesAndDeletes: a desired child missing is created with its
// last-applied state; an observed child not desired is deleted; Result
// says so, its Observed follows the writes, and an unchanged child is not
// written.
func TestWriterCreatesAndDeletes(t *testing.T) {
	f := newWriterFixture(t, v1alpha1.ChildUpdateInPlace)
	result := f.manage(f.set(), f.set(f.want("a", "1"), f.want("b", "1")))
	a, b := f.get("a"), f.get("b")
	if len(result.Written) != 2 || a == nil || b == nil || dataValue(a) != "1" {
		t.Fatalf("creating two: Written %d, stored a=%v b=%v", len(result.Written), a, b)
	}
	if _, ok := a.GetAnnotations()[apply.LastAppliedAnnotation]; !ok {
		t.Error("a created child has no last-applied annotation")
	}
	if got := result.Observed[f.res]["ns/a"]; got == nil || got.GetUID() != a.GetUID() {
		t.Errorf("Result.Observed lacks the created child a: %v", got)
	}
	result = f.manage(f.set(a, b), f.set(f.want("a", "1")))
	if result.Deleted != 1 || len(result.Written) != 0 || f.get("b") != nil {
		t.Errorf("deleting b: Written %d, Deleted %d, stored %v", len(result.Written), result.Deleted, f.get("b"))
	}
	if _, ok := result.Observed[f.res]["ns/b"]; ok {
		t.Error("Result.Observed still holds the deleted child b")
	}
	if result := f.manage(f.set(f.get("a")), f.set(f.want("a", "1"))); result.Wrote() {
		t.Errorf("an unchanged child was written: %+v", result)
	}
}

// TestWriterUpdatesPerMethod: a child that differs from the desired one
// is updated in place (InPlace), deleted to be created again (Recreate),
// or left as it is with a ChildNotUpdated Event (OnDelete).
func TestWriterUpdatesPerMethod(t *testing.T) {
	for _, method := range []v1alpha1.ChildUpdateMethod{v1alpha1.ChildUpdateInPlace, v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateOnDelete} {
		t.Run(string(method), func(t *testing.T) {
			f := newWriterFixture(t, method)
			f.manage(f.set(), f.set(f.want("a", "old")))
			before := f.get("a")
			result := f.manage(f.set(before), f.set(f.want("a", "new")))
			after := f.get("a")
			switch method {
			case v1alpha1.ChildUpdateInPlace:
				if after == nil || after.GetUID() != before.GetUID() || dataValue(after) != "new" || len(result.Written) != 1 {
					t.Errorf("InPlace: child %v, Written %d; want the same object with value new, written", after, len(result.Written))
				}
			case v1alpha1.ChildUpdateRecreate:
				if after != nil || result.Deleted != 1 || len(result.Written) != 0 {
					t.Errorf("Recreate: child %v, Written %d, Deleted %d; want it deleted", after, len(result.Written), result.Deleted)
				}
			case v1alpha1.ChildUpdateOnDelete:
				if after == nil || after.GetResourceVersion() != before.GetResourceVersion() || result.Wrote() {
					t.Errorf("OnDelete: the child was written")
				}
				select {
				case e := <-f.recorder.Events:
					if !strings.Contains(e, ReasonChildNotUpdated) {
						t.Errorf("OnDelete: Event %q, want %s", e, ReasonChildNotUpdated)
					}
				default:
					t.Errorf("OnDelete: no %s Event", ReasonChildNotUpdated)
				}
			}
		})
	}
}

// TestWriterDeletesOnlyTheObservedObject: a delete carries the observed
// UID as a precondition: a child replaced by another object of its name
// meanwhile is kept, and counts as deleted, without error.
func TestWriterDeletesOnlyTheObservedObject(t *testing.T) {
	replacement := inmemory.Object("v1", "ConfigMap", "ns", "a", nil, nil)
	f := newWriterFixture(t, v1alpha1.ChildUpdateInPlace, replacement)
	stale := replacement.DeepCopy()
	stale.SetUID("uid-of-the-object-observed")
	if result := f.manage(f.set(stale), f.set()); result.Deleted != 1 {
		t.Errorf("Deleted %d, want the stale child counted as deleted", result.Deleted)
	}
	if got := f.get("a"); got == nil || got.GetUID() != replacement.GetUID() {
		t.Errorf("the replacement was deleted on the stale child's account")
	}
}

// TestWriterCreateOfATakenName: a create that finds the name taken (by
// another owner, or a child not yet in the cache) is no error and writes
// nothing.
func TestWriterCreateOfATakenName(t *testing.T) {
	theirs := inmemory.Object("v1", "ConfigMap", "ns", "a", nil, nil)
	f := newWriterFixture(t, v1alpha1.ChildUpdateInPlace, theirs)
	if result := f.manage(f.set(), f.set(f.want("a", "mine"))); result.Wrote() {
		t.Errorf("Written %d, Deleted %d, want nothing", len(result.Written), result.Deleted)
	}
	if got := f.get("a"); got == nil || got.GetResourceVersion() != "1" {
		t.Error("the existing object was changed")
	}
}

// TestWriterRepairsDriftClientSide: the three-way merge puts back a field
// the hook sets that another client changed, keeps the fields only the
// other client set, and then writes nothing.
func TestWriterRepairsDriftClientSide(t *testing.T) {
	f := newWriterFixture(t, v1alpha1.ChildUpdateInPlace)
	f.manage(f.set(), f.set(f.want("a", "v")))
	edited, err := f.objects.Client().Resource(writerConfigMaps).Namespace("ns").Patch(t.Context(), "a", "application/merge-patch+json",
		[]byte(`{"data":{"value":"edited","theirs":"t"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if result := f.manage(f.set(edited), f.set(f.want("a", "v"))); len(result.Written) != 1 {
		t.Errorf("repair: Written %d, want 1", len(result.Written))
	}
	repaired := f.get("a")
	if data := repaired.Object["data"].(map[string]any); data["value"] != "v" || data["theirs"] != "t" {
		t.Errorf("after the repair data is %v, want value=v and theirs=t kept", data)
	}
	if result := f.manage(f.set(repaired), f.set(f.want("a", "v"))); result.Wrote() {
		t.Errorf("after the repair: Written %d, want none", len(result.Written))
	}
}

// TestWriterKeepsAChildBeingDeleted: a child whose delete its finalizers
// hold stays in Result.Observed as the delete returned it, with its
// deletionTimestamp; the next call neither deletes nor recreates it.
func TestWriterKeepsAChildBeingDeleted(t *testing.T) {
	held := inmemory.Object("v1", "ConfigMap", "ns", "a", nil, nil)
	held.SetFinalizers([]string{"someone/holds-it"})
	f := newWriterFixture(t, v1alpha1.ChildUpdateRecreate, held)
	result := f.manage(f.set(held), f.set())
	left := result.Observed[f.res]["ns/a"]
	if result.Deleted != 1 || left == nil || left.GetDeletionTimestamp() == nil {
		t.Fatalf("Deleted %d, Observed %v; want the child observed, being deleted", result.Deleted, left)
	}
	again := f.manage(f.set(left), f.set(f.want("a", "v")))
	if again.Wrote() {
		t.Errorf("a child being deleted was written again: Written %d, Deleted %d", len(again.Written), again.Deleted)
	}
}

// TestWriterReportsNameTakenAndStuckChildren: a desired child whose name
// another controller's object holds is not created, is in
// Result.Blocked, and a Warning ChildNameTaken names the holder's
// controller; a desired child of the parent's that is being deleted and
// waits for a finalizer that is not the garbage collector's gets a
// Warning ChildTerminating naming it, once. Fast twin of the integration
// test TestNameTakenIsReportedAndFreedNameResyncs (pkg/composite).
func TestWriterReportsNameTakenAndStuckChildren(t *testing.T) {
	holder := inmemory.Object("v1", "ConfigMap", "ns", "taken", nil, nil)
	holder.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "theirs", UID: "u-theirs", Controller: ptrTo(true)}})
	f := newWriterFixture(t, v1alpha1.ChildUpdateInPlace, holder)
	result := f.manage(f.set(), f.set(f.want("taken", "mine")))
	if len(result.Blocked) != 1 || result.Blocked[0].Name != "taken" || result.Wrote() {
		t.Errorf("Blocked %+v, Wrote %v; want the child blocked and nothing written", result.Blocked, result.Wrote())
	}
	wantEvent(t, f.recorder, "Warning "+ReasonChildNameTaken+" child ConfigMap taken is not created: an object of that name is controlled by Deployment theirs")

	stuck := f.want("stuck", "v")
	stuck.SetUID("u-stuck")
	now := metav1.Now()
	stuck.SetDeletionTimestamp(&now)
	stuck.SetFinalizers([]string{"example.com/hold", metav1.FinalizerDeleteDependents})
	for range 2 {
		f.manage(f.set(stuck), f.set(f.want("stuck", "v")))
	}
	wantEvent(t, f.recorder, "Warning "+ReasonChildTerminating+" child ConfigMap stuck is being deleted since")
	select {
	case e := <-f.recorder.Events:
		t.Errorf("another Event %q, want ChildTerminating once", e)
	default:
	}
}

func ptrTo[T any](v T) *T { return &v }

// wantEvent takes the next Event of recorder and checks it starts with
// prefix.
func wantEvent(t *testing.T, recorder *record.FakeRecorder, prefix string) {
	t.Helper()
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, prefix) {
			t.Errorf("Event %q, want one starting %q", e, prefix)
		}
	default:
		t.Errorf("no Event, want one starting %q", prefix)
	}
}

// TestWriterUpdateOfAChildGoneMeanwhile: an update that finds the child
// deleted since it was observed is no error (as in metacontroller), writes
// nothing, and the child is no longer observed.
func TestWriterUpdateOfAChildGoneMeanwhile(t *testing.T) {
	f := newWriterFixture(t, v1alpha1.ChildUpdateInPlace)
	f.manage(f.set(), f.set(f.want("a", "old")))
	stale := f.get("a")
	if err := f.objects.Client().Resource(writerConfigMaps).Namespace("ns").Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	result := f.manage(f.set(stale), f.set(f.want("a", "new")))
	if result.Wrote() || f.get("a") != nil {
		t.Errorf("Written %d, Deleted %d, stored %v; want nothing written", len(result.Written), result.Deleted, f.get("a"))
	}
	if _, ok := result.Observed[f.res]["ns/a"]; ok {
		t.Error("Result.Observed still holds the child that is gone")
	}
}
