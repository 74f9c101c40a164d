package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// The fakes below stand for the cache (fakeController), the hook (fakeHooks),
// the API server (fakeObjects, fakeDependents) and the work queue
// (fakeQueue), so that each rule of the Engine is checked alone, in
// microseconds.

const testFinalizer = "metacontroller.io/testcontroller-test"

var childResource = &children.Resource{Resource: &discovery.Resource{APIVersion: "v1", Name: "configmaps", Kind: "ConfigMap", Namespaced: true}}

// fakeController serves one object, "ns/p", whose observed children are set by
// the test.
type fakeController struct {
	obj      *unstructured.Unstructured // nil: gone
	selected bool
	ignore   bool
	observed children.Set
	// desiredErr fails every answer's check.
	desiredErr error
	// synced is the resource of things, made once: keys hold it.
	synced *Watched
}

func (k *fakeController) Watch(*Watches) error { return nil }
func (k *fakeController) Keys() []Key {
	return []Key{{Resource: k.Resources()[0], Namespace: "ns", Name: "p"}}
}
func (k *fakeController) Dependents() *children.Declared {
	return children.NewDeclared([]*children.Resource{childResource})
}

// Resources is the resource of things, cached by the kind itself.
func (k *fakeController) Resources() []*Watched {
	if k.synced == nil {
		k.synced = &Watched{
			Resource: &discovery.Resource{APIVersion: "example.com/v1", Name: "things", Kind: "Thing", Namespaced: true, HasStatus: true},
			Selects:  func(metav1.Object) bool { return k.selected }, Noun: "thing", cache: k,
		}
	}
	k.synced.IgnoreStatusChanges = k.ignore
	return []*Watched{k.synced}
}

// Get serves "ns/p", a copy of obj.
func (k *fakeController) Get(namespace, name string) (*unstructured.Unstructured, bool) {
	if k.obj == nil || namespace != "ns" || name != "p" {
		return nil, false
	}
	return k.obj.DeepCopy(), true
}

func (k *fakeController) Observe(_ context.Context, t *Target) (Sync, map[*children.Resource]children.Set, error) {
	return &fakeSync{k: k, obj: t.Object}, map[*children.Resource]children.Set{childResource: k.observed}, nil
}

// fakeRequest is what fakeSync asks the hook.
type fakeRequest struct {
	Seen       *unstructured.Unstructured
	Children   hooks.ObjectMap
	Finalizing bool
}

// fakeResponse is what the fake hook answers: the Answer, and the names
// of the ConfigMaps it wants.
type fakeResponse struct {
	Answer
	Children []string
}

func (*fakeResponse) DecodeHookResponse([]byte, v1alpha1.ResponseUnMarshallMode) error { return nil }

type fakeSync struct {
	k   *fakeController
	obj *unstructured.Unstructured
}

func (s *fakeSync) Request(seen *unstructured.Unstructured, dependents, _ hooks.ObjectMap, finalizing bool) (any, hooks.Response) {
	return &fakeRequest{Seen: seen, Children: dependents, Finalizing: finalizing}, &fakeResponse{}
}

func (s *fakeSync) Read(response hooks.Response) Answer { return response.(*fakeResponse).Answer }

func (s *fakeSync) Desired(response hooks.Response) (map[*children.Resource]children.Set, error) {
	if s.k.desiredErr != nil {
		return nil, s.k.desiredErr
	}
	set := children.Set{}
	for _, name := range response.(*fakeResponse).Children {
		set["ns/"+name] = configMap(name)
	}
	return map[*children.Resource]children.Set{childResource: set}, nil
}

func configMap(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "ns", "name": name, "uid": "uid-" + name, "resourceVersion": "1"}}}
}

// fakeHooks answers each call with answer(name, request), counting calls.
type fakeHooks struct {
	mu     sync.Mutex
	calls  []string                 // hook names
	opts   []hookclient.CallOptions // the calls' options, in order
	answer func(name string, request *fakeRequest) (*fakeResponse, error)
	// customize, when set, answers the customize hook.
	customize func() error
}

func (h *fakeHooks) Call(_ context.Context, _, name string, _ *v1alpha1.Hook, request any, response hooks.Response, opts hookclient.CallOptions) error {
	h.mu.Lock()
	h.calls = append(h.calls, name)
	h.opts = append(h.opts, opts)
	h.mu.Unlock()
	if name == "customize" {
		return h.customize()
	}
	answer, err := h.answer(name, request.(*fakeRequest))
	if err != nil {
		return err
	}
	*response.(*fakeResponse) = *answer
	return nil
}

func (h *fakeHooks) count() int { return len(h.names()) }

func (h *fakeHooks) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// patch is one write of the synced object.
type patch struct {
	subresource string
	data        map[string]any
}

// fakeObjects records the patches of the synced object and answers with
// its metadata as a merge patch of finalizers leaves it.
type fakeObjects struct {
	obj     *unstructured.Unstructured
	patches []patch
	err     error
}

func (o *fakeObjects) Patch(_ context.Context, _ schema.GroupVersionResource, _, _ string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
	if o.err != nil {
		return nil, o.err
	}
	var body any
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, err
	}
	p := patch{data: map[string]any{}}
	if len(subresources) > 0 {
		p.subresource = subresources[0]
	}
	meta := &metav1.ObjectMeta{UID: o.obj.GetUID(), ResourceVersion: fmt.Sprint(len(o.patches) + 100),
		Finalizers: o.obj.GetFinalizers(), Labels: o.obj.GetLabels(), Annotations: o.obj.GetAnnotations()}
	if pt == types.MergePatchType {
		p.data = body.(map[string]any)
		if fs, ok := p.data["metadata"].(map[string]any)["finalizers"].([]any); ok {
			meta.Finalizers = nil
			for _, f := range fs {
				meta.Finalizers = append(meta.Finalizers, f.(string))
			}
		}
	} else {
		p.data["jsonpatch"] = body
	}
	o.patches = append(o.patches, p)
	return meta, nil
}

// finalizerPatches returns the finalizer lists the patches wrote.
func (o *fakeObjects) finalizerPatches() [][]any {
	var out [][]any
	for _, p := range o.patches {
		if meta, ok := p.data["metadata"].(map[string]any); ok {
			if fs, ok := meta["finalizers"].([]any); ok {
				out = append(out, fs)
			}
		}
	}
	return out
}

// statusPatches returns the statuses the patches wrote.
func (o *fakeObjects) statusPatches() []map[string]any {
	var out []map[string]any
	for _, p := range o.patches {
		if ops, ok := p.data["jsonpatch"].([]any); ok {
			out = append(out, ops[1].(map[string]any)["value"].(map[string]any))
		}
	}
	return out
}

// fakeDependents makes the observed ConfigMaps the desired ones, counting
// the writes (any difference in names is one).
type fakeDependents struct {
	manages, writes int
	err             error
}

func (d *fakeDependents) Differs(observed, desired *unstructured.Unstructured) (bool, error) {
	_, changed, err := apply.Apply(observed, desired)
	return changed, err
}

func (d *fakeDependents) Manage(_ context.Context, _ *unstructured.Unstructured, resources []*children.Resource, observed, desired map[*children.Resource]children.Set) (*children.Result, error) {
	d.manages++
	if d.err != nil {
		return nil, d.err
	}
	result := &children.Result{Observed: map[*children.Resource]children.Set{}}
	for _, res := range resources {
		result.Observed[res] = desired[res]
		for key, obj := range desired[res] {
			if _, ok := observed[res][key]; !ok {
				result.Written = append(result.Written, obj)
			}
		}
		for key := range observed[res] {
			if _, ok := desired[res][key]; !ok {
				result.Deleted++
			}
		}
	}
	d.writes += len(result.Written) + result.Deleted
	return result, nil
}

type fakeQueue struct {
	mu       sync.Mutex
	added    []string
	triggers []trigger.Trigger
	after    []time.Duration
}

func (q *fakeQueue) AddFor(key Key, t trigger.Trigger) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.added = append(q.added, key.String())
	q.triggers = append(q.triggers, t)
}

func (q *fakeQueue) AddAfterFor(_ Key, d time.Duration, _ trigger.Trigger) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.after = append(q.after, d)
}

// fixture is an Engine on fakes.
type fixture struct {
	e          *Engine
	kind       *fakeController
	hooks      *fakeHooks
	objects    *fakeObjects
	dependents *fakeDependents
	queue      *fakeQueue
	recorder   *record.FakeRecorder
}

// newFixture returns an Engine of a controller with a sync hook (and a
// finalize hook with finalize), syncing obj.
func newFixture(t *testing.T, obj *unstructured.Unstructured, finalize bool, answer func(name string, request *fakeRequest) (*fakeResponse, error)) *fixture {
	t.Helper()
	f := &fixture{
		kind:       &fakeController{obj: obj, selected: true, observed: children.Set{}},
		hooks:      &fakeHooks{answer: answer},
		objects:    &fakeObjects{obj: obj},
		dependents: &fakeDependents{},
		queue:      &fakeQueue{},
		recorder:   record.NewFakeRecorder(100),
	}
	hook := &v1alpha1.Hook{Version: ptr.To(v1alpha1.HookVersionV1)}
	cfg := Config{
		Kind: "TestController", Object: &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "test"}}},
		Hooks: v1alpha1.Hooks{Sync: hook}, Finalizer: testFinalizer, List: "children", Annotation: AbsentChildrenAnnotation,
	}
	if finalize {
		cfg.Hooks.Finalize = hook
	}
	f.e = NewEngine(cfg, Options{Recorder: f.recorder}, f.kind)
	f.e.hooks.Hooks = f.hooks
	f.e.objects = f.objects
	f.e.dependents = f.dependents
	f.e.queue = f.queue
	f.e.answers.Current = nil
	return f
}

// wrote checks that the sync wrote one status, of countChildren's with
// children, and childWrites children.
func (f *fixture) wrote(t *testing.T, children float64, childWrites int) {
	t.Helper()
	if got := f.objects.statusPatches(); len(got) != 1 || got[0]["children"] != children {
		t.Errorf("status writes %v, want one of children: %v", got, children)
	}
	if f.dependents.writes != childWrites {
		t.Errorf("%d child writes, want %d", f.dependents.writes, childWrites)
	}
}

func (f *fixture) sync(t *testing.T) error {
	t.Helper()
	_, err := f.e.sync(context.Background(), &loop.Sync[Key]{Key: f.key()})
	return err
}

// key is the queue key of "ns/p".
func (f *fixture) key() Key { return f.kind.Keys()[0] }

func thing(finalizers ...string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"namespace": "ns", "name": "p", "uid": "uid-p", "resourceVersion": "7"}}}
	obj.SetFinalizers(finalizers)
	return obj
}

func deleting(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	return obj
}

// countChildren answers with one child, "c", and a status counting the
// children it was given: a hook that reads its own writes.
func countChildren(_ string, request *fakeRequest) (*fakeResponse, error) {
	n := len(request.Children["ConfigMap.v1"])
	return &fakeResponse{Answer: Answer{Status: map[string]any{"children": int64(n)}}, Children: []string{"c"}}, nil
}

// TestRoundsReachTheFixedPoint: the hook is called again with the
// children as written and the status it asked for, until an answer asks
// for no write; the status is written once, from the last answer.
func TestRoundsReachTheFixedPoint(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	// 1: no child, status 0 (child written); 2: one child, status 1 (a new
	// status); 3: the same: the fixed point.
	if n := f.hooks.count(); n != 3 {
		t.Errorf("%d hook calls, want 3", n)
	}
	f.wrote(t, 1, 1)
}

// TestSyncCallsShareItsHold: every hook call of a sync is made with the
// sync's Hold of its answers (hookclient.CallOptions), one per sync; a
// sync that is no retry and records no span marks none as a retry.
func TestSyncCallsShareItsHold(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	for range 2 {
		if err := f.sync(t); err != nil {
			t.Fatal(err)
		}
	}
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	if len(f.hooks.opts) < 4 {
		t.Fatalf("%d hook calls, want at least 4", len(f.hooks.opts))
	}
	first := f.hooks.opts[0].Hold
	for i, o := range f.hooks.opts {
		if o.Hold == nil || o.Retry {
			t.Errorf("call %d: options %+v, want a Hold and no retry", i, o)
		}
		if i < 3 && o.Hold != first {
			t.Errorf("call %d of the first sync has another Hold", i)
		}
		if i >= 3 && o.Hold == first {
			t.Errorf("call %d of the second sync has the first sync's Hold", i)
		}
	}
}

// TestResyncAfterSecondsOfEveryRound: a resync that an earlier call of
// the sync asked for stands when a later one asks for none, and the
// shortest of several wins, as when each call is a sync of its own
// (metacontroller). A delay below DefaultMinResyncAfter is raised to it,
// one too long for a time.Duration is the longest. (The floor was seen
// failing with resyncDelay returning the delay asked: 1e-9 came back as
// 1ns.)
func TestResyncAfterSecondsOfEveryRound(t *testing.T) {
	for name, tc := range map[string]struct {
		asked []float64 // by call: 3 calls (countChildren's rounds)
		want  time.Duration
	}{
		"only the first call":   {asked: []float64{30, 0, 0}, want: 30 * time.Second},
		"the shortest":          {asked: []float64{30, 2.5, 10}, want: 2500 * time.Millisecond},
		"below the floor":       {asked: []float64{1e-9, 0, 0}, want: DefaultMinResyncAfter},
		"a shortest below it":   {asked: []float64{30, 0.5, 0}, want: DefaultMinResyncAfter},
		"beyond a Duration":     {asked: []float64{1e300, 0, 0}, want: time.Duration(math.MaxInt64)},
		"only the last call":    {asked: []float64{0, 0, 2}, want: 2 * time.Second},
		"none":                  {asked: []float64{0, 0, 0}, want: 0},
		"negative is not asked": {asked: []float64{-1, 0, 0}, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			f := newFixture(t, thing(), false, func(hook string, request *fakeRequest) (*fakeResponse, error) {
				if calls >= len(tc.asked) {
					return nil, fmt.Errorf("call %d, want %d calls", calls+1, len(tc.asked))
				}
				response, err := countChildren(hook, request)
				response.Answer.ResyncAfterSeconds = tc.asked[calls]
				calls++
				return response, err
			})
			delay, err := f.e.sync(context.Background(), &loop.Sync[Key]{Key: f.key()})
			if err != nil {
				t.Fatal(err)
			}
			if calls != 3 {
				t.Fatalf("%d calls, want 3", calls)
			}
			if delay != tc.want {
				t.Errorf("resync after %v, want %v", delay, tc.want)
			}
		})
	}
}

// TestRoundsGiveTheHookTheObjectAsAnswered: the second call sees the
// labels, annotations and status the first answer asked for; a label
// removed (null) is gone.
func TestRoundsGiveTheHookTheObjectAsAnswered(t *testing.T) {
	obj := thing()
	obj.SetLabels(map[string]string{"old": "x"})
	var seen []*unstructured.Unstructured
	f := newFixture(t, obj, false, func(_ string, request *fakeRequest) (*fakeResponse, error) {
		seen = append(seen, request.Seen)
		return &fakeResponse{Answer: Answer{Status: map[string]any{"a": "b"}, Labels: map[string]*string{"new": ptr.To("y"), "old": nil},
			Annotations: map[string]*string{"note": ptr.To("z")}}}, nil
	})
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("%d calls, want 2", len(seen))
	}
	second := seen[1]
	if l := second.GetLabels(); len(l) != 1 || l["new"] != "y" {
		t.Errorf("second call's labels %v, want new=y only", l)
	}
	if a := second.GetAnnotations(); a["note"] != "z" {
		t.Errorf("second call's annotations %v", a)
	}
	if s, _ := second.Object["status"].(map[string]any); s["a"] != "b" {
		t.Errorf("second call's status %v", s)
	}
	if l := seen[0].GetLabels(); l["old"] != "x" {
		t.Errorf("the first call's object was changed: %v", l)
	}
	// One metadata patch (labels and annotations), one status patch.
	if len(f.objects.patches) != 2 || f.objects.patches[1].subresource != "status" {
		t.Errorf("patches %+v, want metadata then status", f.objects.patches)
	}
}

// TestIgnoreStatusChangesSettlesOnStatus: with IgnoreStatusChanges, a new
// status alone does not call the hook again.
func TestIgnoreStatusChangesSettlesOnStatus(t *testing.T) {
	f := newFixture(t, thing(), false, func(string, *fakeRequest) (*fakeResponse, error) {
		return &fakeResponse{Answer: Answer{Status: map[string]any{"n": int64(1)}}}, nil
	})
	f.kind.ignore = true
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if n := f.hooks.count(); n != 1 {
		t.Errorf("%d calls, want 1", n)
	}
	if len(f.objects.statusPatches()) != 1 {
		t.Errorf("the status was not written: %+v", f.objects.patches)
	}
}

// TestUnsettledHookIsRetried: a hook whose status changes on every call
// is called MaxRounds times; the last status is written and the sync
// returns errNotSettled, with a HookNotSettled Event.
func TestUnsettledHookIsRetried(t *testing.T) {
	calls := 0
	f := newFixture(t, thing(), false, func(string, *fakeRequest) (*fakeResponse, error) {
		calls++
		return &fakeResponse{Answer: Answer{Status: map[string]any{"counter": int64(calls)}, ResyncAfterSeconds: 3}}, nil
	})
	err := f.sync(t)
	if !IsNotSettled(err) {
		t.Fatalf("err = %v, want errNotSettled", err)
	}
	if calls != MaxRounds {
		t.Errorf("%d calls, want %d", calls, MaxRounds)
	}
	if got := f.objects.statusPatches(); len(got) != 1 || got[0]["counter"] != float64(MaxRounds) {
		t.Errorf("status writes %v, want the last answer's", got)
	}
	if len(f.queue.after) != 1 || f.queue.after[0] != 3*time.Second {
		t.Errorf("resyncs asked %v, want 3s", f.queue.after)
	}
	if !strings.Contains(<-f.recorder.Events, "HookNotSettled") {
		t.Error("no HookNotSettled Event")
	}
}

// TestFailureLeavesChildrenUntouched: a failed first call, an invalid
// answer, or an answer without its list while there are children writes
// nothing: no child, no status, no finalizer; the object gets a SyncError
// Event and the error is returned for a retry.
func TestFailureLeavesChildrenUntouched(t *testing.T) {
	for name, tc := range map[string]struct {
		answer     func(string, *fakeRequest) (*fakeResponse, error)
		desiredErr error
		want       string
	}{
		"hook fails": {answer: func(string, *fakeRequest) (*fakeResponse, error) { return nil, errors.New("connection refused") }, want: "connection refused"},
		"invalid answer": {answer: countChildren, desiredErr: errors.New(`children[0]: no name`),
			want: `invalid sync hook response: children[0]: no name`},
		"absent list": {answer: func(string, *fakeRequest) (*fakeResponse, error) {
			return &fakeResponse{Answer: Answer{ListAbsent: true, Status: map[string]any{"x": "y"}}}, nil
		}, want: `has no "children" list`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, thing(testFinalizer), true, tc.answer)
			f.kind.observed = children.Set{"ns/old": configMap("old")}
			f.kind.desiredErr = tc.desiredErr
			err := f.sync(t)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if f.dependents.manages != 0 || len(f.objects.patches) != 0 {
				t.Errorf("wrote %d times children, patches %+v; want nothing", f.dependents.manages, f.objects.patches)
			}
			if ev := <-f.recorder.Events; !strings.HasPrefix(ev, "Warning SyncError testcontroller test: ") {
				t.Errorf("Event %q, want a SyncError", ev)
			}
		})
	}
}

// TestLaterFailureKeepsEarlierAnswers: once an answer was written, a later
// call that fails leaves it in force: its status is written, and the
// error retries the object.
func TestLaterFailureKeepsEarlierAnswers(t *testing.T) {
	calls := 0
	f := newFixture(t, thing(), false, func(name string, request *fakeRequest) (*fakeResponse, error) {
		if calls++; calls > 1 {
			return nil, errors.New("hook down")
		}
		return countChildren(name, request)
	})
	err := f.sync(t)
	if err == nil || !strings.Contains(err.Error(), "hook down") {
		t.Fatalf("err = %v", err)
	}
	f.wrote(t, 0, 1) // the first answer's
}

// TestChildWriteFailureStillWritesStatus: a failed child write ends the
// rounds; the status of its answer is written, and the error returned.
func TestChildWriteFailureStillWritesStatus(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	f.dependents.err = errors.New("quota exceeded")
	if err := f.sync(t); err == nil || !strings.Contains(err.Error(), "quota exceeded") {
		t.Fatalf("err = %v", err)
	}
	if n := f.hooks.count(); n != 1 || len(f.objects.statusPatches()) != 1 {
		t.Errorf("%d calls, status writes %v; want 1 and 1", n, f.objects.statusPatches())
	}
}

// TestFinalizerDecision: what a sync does with the finalizer, and which
// hook it calls, for each state of the object.
func TestFinalizerDecision(t *testing.T) {
	finalized := func(done bool) func(string, *fakeRequest) (*fakeResponse, error) {
		return func(string, *fakeRequest) (*fakeResponse, error) {
			return &fakeResponse{Answer: Answer{Status: map[string]any{}, Finalized: done}}, nil
		}
	}
	for name, tc := range map[string]struct {
		obj      *unstructured.Unstructured
		finalize bool // the controller has a finalize hook
		selected bool
		done     bool // the finalize hook answers finalized
		// hooks called, and the finalizer lists written, in order
		calls      []string
		finalizers [][]any
	}{
		"added before the first sync": {obj: thing("other"), finalize: true, selected: true,
			calls: []string{"sync"}, finalizers: [][]any{{"other", testFinalizer}}},
		"kept while present": {obj: thing(testFinalizer), finalize: true, selected: true, calls: []string{"sync"}},
		"finalized on delete": {obj: deleting(thing(testFinalizer, "other")), finalize: true, selected: true, done: true,
			calls: []string{"finalize"}, finalizers: [][]any{{"other"}}},
		"kept until finalized": {obj: deleting(thing(testFinalizer)), finalize: true, selected: true,
			calls: []string{"finalize"}},
		"finalized when no longer selected": {obj: thing(testFinalizer), finalize: true, done: true,
			calls: []string{"finalize"}, finalizers: [][]any{{}}},
		"deleted without it: left alone":      {obj: deleting(thing()), finalize: true, selected: true},
		"not selected without it: left alone": {obj: thing(), finalize: true},
		"stale one removed": {obj: thing(testFinalizer), selected: true,
			calls: []string{"sync"}, finalizers: [][]any{{}}},
		"stale one removed from a deleted object": {obj: deleting(thing(testFinalizer)), selected: true,
			finalizers: [][]any{{}}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.obj, tc.finalize, finalized(tc.done))
			f.kind.selected = tc.selected
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(f.hooks.calls) != fmt.Sprint(tc.calls) {
				t.Errorf("calls %v, want %v", f.hooks.calls, tc.calls)
			}
			if got := f.objects.finalizerPatches(); fmt.Sprint(got) != fmt.Sprint(tc.finalizers) {
				t.Errorf("finalizers written %v, want %v", got, tc.finalizers)
			}
		})
	}
}

// TestFinalizingCallsTheHookWithFinalizing: the finalize hook is told so.
func TestFinalizingCallsTheHookWithFinalizing(t *testing.T) {
	var finalizing []bool
	f := newFixture(t, deleting(thing(testFinalizer)), true, func(_ string, request *fakeRequest) (*fakeResponse, error) {
		finalizing = append(finalizing, request.Finalizing)
		return &fakeResponse{Answer: Answer{Status: map[string]any{}, Finalized: true}}, nil
	})
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if len(finalizing) != 1 || !finalizing[0] {
		t.Errorf("finalizing %v, want [true]", finalizing)
	}
}

// TestGoneObject: a sync of an object no longer in the cache calls
// nothing and writes nothing.
func TestGoneObject(t *testing.T) {
	f := newFixture(t, nil, true, countChildren)
	f.objects.obj = thing()
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if f.hooks.count() != 0 || len(f.objects.patches) != 0 {
		t.Errorf("calls %v, patches %v", f.hooks.calls, f.objects.patches)
	}
}

// TestEchoesOfOwnWritesNeedNoSync: the watch events of the sync's own
// writes, arriving during the sync, do not queue the object again, nor
// leave their trigger; an event of someone else's write does, with its
// trigger.
func TestEchoesOfOwnWritesNeedNoSync(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	// The child's echo arrives while the sync runs (after the first write).
	var h *fakeHooks = f.hooks
	calls := 0
	h.answer = func(name string, request *fakeRequest) (*fakeResponse, error) {
		if calls++; calls == 2 {
			f.e.enqueueFor(f.key(), configMap("c"), trigger.Trigger{Cause: trigger.CauseDependent, Object: "echo"})                                                                      // the echo of the child written
			f.e.enqueueFor(f.key(), &metav1.ObjectMeta{UID: "uid-c", ResourceVersion: "2", Namespace: "ns", Name: "c"}, trigger.Trigger{Cause: trigger.CauseDependent, Object: "other"}) // not ours
		}
		return countChildren(name, request)
	}
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if want := []trigger.Trigger{{Cause: trigger.CauseDependent, Object: "other"}}; len(f.queue.added) != 1 || !slices.Equal(f.queue.triggers, want) {
		t.Errorf("queued %v for %v after the sync, want once, for the change not ours (%v)", f.queue.added, f.queue.triggers, want)
	}

	f.queue.added, f.queue.triggers = nil, nil
	calls = 0
	h.answer = func(name string, request *fakeRequest) (*fakeResponse, error) {
		if calls++; calls == 2 {
			f.e.enqueueFor(f.key(), configMap("c"), trigger.Trigger{Cause: trigger.CauseDependent})
		}
		return countChildren(name, request)
	}
	f.kind.observed = children.Set{}
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if len(f.queue.added) != 0 {
		t.Errorf("queued %v after a sync whose only event was its echo", f.queue.added)
	}
}
