//go:build integration

package children_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

const ssaManager = children.FieldManagerPrefix + "ssa-test"

// countingTransport counts the writes (any request but GET) it passes on.
type countingTransport struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(req)
}

// ssaFixture is a Writer of one resource against the test's API server,
// applying server-side (ServerSide set) or client-side, whose requests
// are counted, and a parent ConfigMap.
type ssaFixture struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	writer *children.Writer
	counts *countingTransport
	parent *unstructured.Unstructured
	res    *children.Resource
}

func newSSAFixture(t *testing.T, groupVersion, resource string, serverSide *children.ServerSide) *ssaFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	resources := discovery.NewResourceMap(env.Kube.Discovery(), discovery.Options{})
	r, err := resources.Get(ctx, groupVersion, resource)
	if err != nil {
		t.Fatal(err)
	}
	// metactl run's user agent, after which the API server names the
	// field manager of client-side writes (children.ClientSideManager).
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "metactl/test"
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counts := &countingTransport{next: httpClient.Transport}
	httpClient.Transport = counts
	objects, err := objectclient.New(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	ns := env.CreateNamespace(t)
	parent, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "parent"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &ssaFixture{t: t, ctx: ctx, ns: ns, counts: counts, parent: parent,
		writer: &children.Writer{Objects: objects, Controller: "ssa-test", Recorder: record.NewFakeRecorder(100), ServerSide: serverSide},
		res:    &children.Resource{Resource: r, Method: v1alpha1.ChildUpdateInPlace}}
}

// own makes child the parent's, as the controller's desired objects are.
func (f *ssaFixture) own(child *unstructured.Unstructured) *unstructured.Unstructured {
	child.SetNamespace(f.ns)
	child.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(f.parent, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	return child
}

func (f *ssaFixture) set(objs ...*unstructured.Unstructured) map[*children.Resource]children.Set {
	return setOf(f.res, objs...)
}

// cached returns the child as metactl's cache holds it (decoded from the
// server's JSON by pkg/dynamic/informer: managedFields of metactl's
// managers only), nil when there is none.
func (f *ssaFixture) cached(name string) *unstructured.Unstructured {
	f.t.Helper()
	obj, err := env.Dynamic.Resource(f.res.GroupVersionResource()).Namespace(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Fatal(err)
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		f.t.Fatal(err)
	}
	o, err := informer.NewObject(data)
	if err != nil {
		f.t.Fatal(err)
	}
	u, err := o.Unstructured()
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// manage runs Manage of want against the cached child of its name, and
// returns the result and the number of write requests it sent.
func (f *ssaFixture) manage(want *unstructured.Unstructured) (*children.Result, int64, error) {
	f.t.Helper()
	observed := f.set()
	if have := f.cached(want.GetName()); have != nil {
		observed = f.set(have)
	}
	before := f.counts.writes.Load()
	result, err := f.writer.Manage(f.ctx, f.parent, []*children.Resource{f.res}, observed, f.set(want))
	return result, f.counts.writes.Load() - before, err
}

func (f *ssaFixture) mustManage(want *unstructured.Unstructured) (*children.Result, int64) {
	f.t.Helper()
	result, writes, err := f.manage(want)
	if err != nil {
		f.t.Fatalf("Manage: %v", err)
	}
	return result, writes
}

// edit changes the child as another client would, with a JSON merge patch
// sent as field manager "someone-else".
func (f *ssaFixture) edit(name, patch string) {
	f.t.Helper()
	if _, err := env.Dynamic.Resource(f.res.GroupVersionResource()).Namespace(f.ns).Patch(f.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		f.t.Fatal(err)
	}
}

func configMap(name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data}}
}

func ssa() *children.ServerSide { return &children.ServerSide{FieldManager: ssaManager, Force: true} }

// applyEntry returns the child's managedFields entry of operation Apply of
// manager, nil if it has none.
func applyEntry(obj *unstructured.Unstructured, manager string) *metav1.ManagedFieldsEntry {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
			return &e
		}
	}
	return nil
}

// TestServerSideCreates: a missing child is created by a server-side
// apply as the controller's field manager, without the last-applied
// annotation; applying the same again sends nothing.
func TestServerSideCreates(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", ssa())
	result, writes := f.mustManage(f.own(configMap("a", map[string]any{"k": "v"})))
	if len(result.Written) != 1 || writes != 1 {
		t.Fatalf("create: Written %d, %d write requests; want 1 and 1", len(result.Written), writes)
	}
	got := f.cached("a")
	if got == nil || got.Object["data"].(map[string]any)["k"] != "v" {
		t.Fatalf("created child %v", got)
	}
	if _, ok := got.GetAnnotations()[apply.LastAppliedAnnotation]; ok {
		t.Error("a child applied server-side has the last-applied annotation")
	}
	if applyEntry(got, ssaManager) == nil {
		t.Errorf("no Apply entry of %s in managedFields %v", ssaManager, got.GetManagedFields())
	}
	if result, writes := f.mustManage(f.own(configMap("a", map[string]any{"k": "v"}))); result.Wrote() || writes != 0 {
		t.Errorf("no-op: Written %d, %d write requests; want none", len(result.Written), writes)
	}
}

// TestServerSideRepairsDrift: a field the controller applies, changed or
// removed by another client, is put back by the next sync; a field the
// other client added is kept; once repaired, a sync writes nothing.
func TestServerSideRepairsDrift(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", ssa())
	want := func() *unstructured.Unstructured {
		return f.own(configMap("a", map[string]any{"k": "v", "gone": "x"}))
	}
	f.mustManage(want())
	f.edit("a", `{"data":{"k":"edited","gone":null,"theirs":"t"}}`)

	result, writes := f.mustManage(want())
	if len(result.Written) != 1 || writes != 1 {
		t.Errorf("repair: Written %d, %d write requests; want 1 and 1", len(result.Written), writes)
	}
	data := f.cached("a").Object["data"].(map[string]any)
	if data["k"] != "v" || data["gone"] != "x" || data["theirs"] != "t" {
		t.Errorf("after the repair data is %v, want k=v, gone=x and theirs=t kept", data)
	}
	if result, writes := f.mustManage(want()); result.Wrote() || writes != 0 {
		t.Errorf("after the repair: Written %d, %d write requests; want none", len(result.Written), writes)
	}
}

// TestServerSideRemovesWhatIsNoLongerDesired: a field the controller
// applied and no longer sets is removed (its managed fields, not a hash of
// desired, tell).
func TestServerSideRemovesWhatIsNoLongerDesired(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", ssa())
	f.mustManage(f.own(configMap("a", map[string]any{"k": "v", "old": "x"})))
	result, writes := f.mustManage(f.own(configMap("a", map[string]any{"k": "v"})))
	if len(result.Written) != 1 || writes != 1 {
		t.Errorf("Written %d, %d write requests; want 1 and 1", len(result.Written), writes)
	}
	if data := f.cached("a").Object["data"].(map[string]any); data["old"] != nil || data["k"] != "v" {
		t.Errorf("data %v, want old removed", data)
	}
}

// TestServerSideRefusesConflicts: with Force false, an apply of a field
// another manager owns fails with the conflict, and changes nothing.
func TestServerSideRefusesConflicts(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", &children.ServerSide{FieldManager: ssaManager})
	f.mustManage(f.own(configMap("a", map[string]any{"k": "v"})))
	f.edit("a", `{"data":{"k":"edited"}}`)
	_, _, err := f.manage(f.own(configMap("a", map[string]any{"k": "v"})))
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "refuse-apply-conflicts") || !strings.Contains(err.Error(), "someone-else") {
		t.Errorf("Manage: %v, want a conflict naming someone-else and --refuse-apply-conflicts", err)
	}
	if v := f.cached("a").Object["data"].(map[string]any)["k"]; v != "edited" {
		t.Errorf("k is %v: the refused apply changed it", v)
	}
}

func deployment(name string, args []any, replicas int64) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": name, "labels": labels},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "web", "image": "nginx:1.27", "args": args,
					"ports":     []any{map[string]any{"containerPort": int64(80)}},
					"resources": map[string]any{"limits": map[string]any{"cpu": "500m"}},
				}}},
			},
		},
	}}
}

// TestServerSideListsAndDefaults: on a Deployment (list maps keyed by
// name and by port with a defaulted protocol, atomic lists, defaulted
// fields), a sync after the create writes nothing, an element appended to
// an atomic list the controller sets is removed again, and a replica count
// changed by someone else is put back.
func TestServerSideListsAndDefaults(t *testing.T) {
	f := newSSAFixture(t, "apps/v1", "deployments", ssa())
	want := func() *unstructured.Unstructured { return f.own(deployment("web", []any{"--a"}, 2)) }
	f.mustManage(want())
	if result, writes := f.mustManage(want()); result.Wrote() || writes != 0 {
		t.Fatalf("no-op after create: Written %d, %d write requests; want none", len(result.Written), writes)
	}

	f.edit("web", `{"spec":{"replicas":5}}`)
	if result, writes := f.mustManage(want()); len(result.Written) != 1 || writes != 1 {
		t.Errorf("replicas drift: Written %d, %d write requests; want 1 and 1", len(result.Written), writes)
	}
	if r, _, _ := unstructured.NestedInt64(f.cached("web").Object, "spec", "replicas"); r != 2 {
		t.Errorf("replicas %d after the repair, want 2", r)
	}

	// The container list is a list map: a strategic merge patch by
	// someone else changes its args (an atomic list).
	if _, err := env.Dynamic.Resource(f.res.GroupVersionResource()).Namespace(f.ns).Patch(f.ctx, "web", "application/strategic-merge-patch+json",
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"web","args":["--a","--b"]}]}}}}`), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	if result, writes := f.mustManage(want()); len(result.Written) != 1 || writes != 1 {
		t.Errorf("args drift: Written %d, %d write requests; want 1 and 1", len(result.Written), writes)
	}
	containers, _, _ := unstructured.NestedSlice(f.cached("web").Object, "spec", "template", "spec", "containers")
	if args := containers[0].(map[string]any)["args"]; len(args.([]any)) != 1 {
		t.Errorf("args %v after the repair, want [--a]", args)
	}
	if result, writes := f.mustManage(want()); result.Wrote() || writes != 0 {
		t.Errorf("no-op after the repairs: Written %d, %d write requests; want none", len(result.Written), writes)
	}
}

// TestClientSideRepairsDrift: the three-way merge puts back a field the
// hook sets that another client changed, and then writes nothing.
func TestClientSideRepairsDrift(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", nil)
	want := func() *unstructured.Unstructured { return f.own(configMap("a", map[string]any{"k": "v"})) }
	f.mustManage(want())
	f.edit("a", `{"data":{"k":"edited","theirs":"t"}}`)
	if result, writes := f.mustManage(want()); len(result.Written) != 1 || writes != 1 {
		t.Errorf("repair: Written %d, %d write requests; want 1 and 1", len(result.Written), writes)
	}
	if data := f.cached("a").Object["data"].(map[string]any); data["k"] != "v" || data["theirs"] != "t" {
		t.Errorf("after the repair data is %v, want k=v and theirs=t kept", data)
	}
	if result, writes := f.mustManage(want()); result.Wrote() || writes != 0 {
		t.Errorf("after the repair: Written %d, %d write requests; want none", len(result.Written), writes)
	}
}

// sharedFields returns, for each field manager entry of obj other than
// manager's Apply entry, the fields it owns that manager's entry owns too.
func sharedFields(t *testing.T, obj *unstructured.Unstructured, manager string, operation metav1.ManagedFieldsOperationType) []string {
	t.Helper()
	var mine *fieldpath.Set
	sets := map[string]*fieldpath.Set{}
	for _, e := range obj.GetManagedFields() {
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			t.Fatal(err)
		}
		if e.Manager == manager && e.Operation == operation {
			mine = s
			continue
		}
		sets[e.Manager+" "+string(e.Operation)] = s
	}
	if mine == nil {
		t.Fatalf("no %s entry of %s in %v", operation, manager, obj.GetManagedFields())
	}
	var shared []string
	for name, s := range sets {
		if both := mine.Intersection(s); !both.Empty() {
			shared = append(shared, name+": "+both.String())
		}
	}
	return shared
}

// rawObject is the child as the server has it, managedFields whole.
func (f *ssaFixture) rawObject(name string) *unstructured.Unstructured {
	f.t.Helper()
	obj, err := env.Dynamic.Resource(f.res.GroupVersionResource()).Namespace(f.ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return obj
}

// TestSwitchingStrategies: a child written client-side, then by the same
// controller server-side, then client-side again, keeps its content (spec
// or data) at each switch; after each, no field is owned by two field
// managers, the next sync writes nothing, and a field the hook stops
// setting is removed (which a field left to the other strategy's manager
// would not be).
func TestSwitchingStrategies(t *testing.T) {
	for _, tc := range []struct {
		groupVersion, resource, content string
		want                            func(drop bool) *unstructured.Unstructured
	}{
		{"v1", "configmaps", "data", func(drop bool) *unstructured.Unstructured {
			data := map[string]any{"k": "v", "extra": "x"}
			if drop {
				delete(data, "extra")
			}
			return configMap("a", data)
		}},
		{"apps/v1", "deployments", "spec", func(drop bool) *unstructured.Unstructured {
			d := deployment("a", []any{"--a"}, 2)
			if drop {
				unstructured.RemoveNestedField(d.Object, "spec", "replicas")
			}
			return d
		}},
	} {
		// Whatever the update method: a switch changes no content, so it
		// is no reason to recreate a child (Recreate) or to report the
		// hook's change as not made (OnDelete).
		for _, method := range []v1alpha1.ChildUpdateMethod{v1alpha1.ChildUpdateInPlace, v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateOnDelete} {
			t.Run(tc.resource+"/"+string(method), func(t *testing.T) {
				f := newSSAFixture(t, tc.groupVersion, tc.resource, nil)
				f.res.Method = method
				want := func(drop bool) *unstructured.Unstructured { return f.own(tc.want(drop)) }
				f.mustManage(want(false))
				before := f.rawObject("a")

				steps := []struct {
					name       string
					serverSide *children.ServerSide
					manager    string
					operation  metav1.ManagedFieldsOperationType
				}{
					{"to server-side", ssa(), ssaManager, metav1.ManagedFieldsOperationApply},
					{"back to client-side", nil, children.ClientSideManager, metav1.ManagedFieldsOperationUpdate},
				}
				for _, step := range steps {
					f.writer.ServerSide = step.serverSide
					f.mustManage(want(false))
					after := f.rawObject("a")
					if after.GetUID() != before.GetUID() {
						t.Errorf("%s: the child was replaced", step.name)
					}
					if !apply.Equal(before.Object[tc.content], after.Object[tc.content]) {
						t.Errorf("%s: %s changed from %v to %v", step.name, tc.content, before.Object[tc.content], after.Object[tc.content])
					}
					if shared := sharedFields(t, after, step.manager, step.operation); len(shared) > 0 {
						t.Errorf("%s: fields of %s also owned by %v", step.name, step.manager, shared)
					}
					if _, ok := after.GetAnnotations()[apply.LastAppliedAnnotation]; ok != (step.serverSide == nil) {
						t.Errorf("%s: last-applied annotation present %v", step.name, ok)
					}
					if result, writes := f.mustManage(want(false)); result.Wrote() || writes != 0 {
						t.Errorf("%s: the sync after the switch: Written %d, %d write requests; want none", step.name, len(result.Written), writes)
					}
					before = after
				}

				if method != v1alpha1.ChildUpdateInPlace {
					return
				}
				// Server-side again, then the hook drops a field.
				f.writer.ServerSide = ssa()
				f.mustManage(want(false))
				f.mustManage(want(true))
				dropped := f.rawObject("a")
				if tc.resource == "configmaps" {
					if _, ok := dropped.Object["data"].(map[string]any)["extra"]; ok {
						t.Errorf("the dropped field data.extra is still there: %v", dropped.Object["data"])
					}
				} else if r, _, _ := unstructured.NestedInt64(dropped.Object, "spec", "replicas"); r != 1 {
					t.Errorf("spec.replicas %d after the hook dropped it, want the default 1", r)
				}
			})
		}
	}
}

// TestServerSideCreateOfATakenName: as client-side, a server-side create
// of a name the cache holds for another owner, or for no owner, writes
// nothing (an apply would take the object over).
func TestServerSideCreateOfATakenName(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", ssa())
	objects, err := objectclient.New(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	informers := informer.NewFactory(objects.ListerWatcher, informer.Options{})
	f.res.Informer = informers.Acquire(configMapsGVR)
	t.Cleanup(f.res.Informer.Release)

	other := f.own(configMap("other-parent", nil))
	other.SetOwnerReferences(nil)
	otherParent, err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Create(f.ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	theirs := f.own(configMap("theirs", map[string]any{"k": "theirs"}))
	theirs.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(otherParent, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})})
	orphan := f.own(configMap("orphan", map[string]any{"k": "nobody's"}))
	orphan.SetOwnerReferences(nil)
	for _, o := range []*unstructured.Unstructured{theirs, orphan} {
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Create(f.ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "both in the cache", func(context.Context) (bool, error) {
		_, a := f.res.Informer.GetMeta(f.ns, "theirs")
		_, b := f.res.Informer.GetMeta(f.ns, "orphan")
		return a && b, nil
	})

	for _, name := range []string{"theirs", "orphan"} {
		before, writes := f.rawObject(name), f.counts.writes.Load()
		result, err := f.writer.Manage(f.ctx, f.parent, []*children.Resource{f.res}, f.set(), f.set(f.own(configMap(name, map[string]any{"k": "mine"}))))
		if err != nil || result.Wrote() || f.counts.writes.Load() != writes {
			t.Errorf("%s: Manage: %v, wrote %v, %d write requests; want no error and nothing written", name, err, result.Wrote(), f.counts.writes.Load()-writes)
		}
		if after := f.rawObject(name); after.GetResourceVersion() != before.GetResourceVersion() {
			t.Errorf("%s was changed: %v", name, after.Object["data"])
		}
	}
}

// TestServerSideTakesOverMetacontrollersApply: a child metacontroller
// applied server-side (field manager "metacontroller") is handed over to
// the controller's field manager at its first apply: no field stays owned
// by both, and a field the hook then drops is removed.
func TestServerSideTakesOverMetacontrollersApply(t *testing.T) {
	f := newSSAFixture(t, "v1", "configmaps", ssa())
	want := func(data map[string]any) *unstructured.Unstructured { return f.own(configMap("a", data)) }
	body, err := json.Marshal(want(map[string]any{"k": "v", "extra": "x"}).Object)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(f.ns).Patch(f.ctx, "a", types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: children.MetacontrollerManager, Force: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	f.mustManage(want(map[string]any{"k": "v", "extra": "x"}))
	if shared := sharedFields(t, f.rawObject("a"), ssaManager, metav1.ManagedFieldsOperationApply); len(shared) > 0 {
		t.Errorf("fields of %s also owned by %v", ssaManager, shared)
	}
	if result, writes := f.mustManage(want(map[string]any{"k": "v", "extra": "x"})); result.Wrote() || writes != 0 {
		t.Errorf("the sync after the take-over: Written %d, %d write requests; want none", len(result.Written), writes)
	}
	f.mustManage(want(map[string]any{"k": "v"}))
	if data := f.rawObject("a").Object["data"].(map[string]any); data["extra"] != nil {
		t.Errorf("data %v: the field the hook dropped is still there", data)
	}
}
