//go:build integration

package composite_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

var (
	env       *testenv.Environment
	resources *discovery.ResourceMap
	informers *informer.Factory
	objects   *objectclient.Client
	recorder  record.EventRecorder

	thingsGVR        = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "things"}
	plainThingsGVR   = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "plainthings"}
	childThingsGVR   = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "childthings"}
	clusterThingsGVR = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}
	configMapsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{GarbageCollector: true, ExtraCRDPaths: []string{"testdata/crds"}}, &env)
}

// shared sets resources, informers, objects and recorder: what a manager
// shares among controllers.
var sharedOnce sync.Once

func shared(t *testing.T) {
	sharedOnce.Do(func() {
		s := controllertest.Get(t, env)
		resources, informers, objects, recorder = s.Resources, s.Informers, s.Objects, s.Recorder
	})
}

func ctx(t *testing.T) context.Context { return controllertest.Context(t) }

// syncRequest is what a test hook reads from a sync request.
type syncRequest = controllertest.Request

// testHook is an in-process hook whose answer a test sets and changes.
type testHook struct {
	server   *httptest.Server
	calls    atomic.Int64
	mu       sync.Mutex
	handler  func(w http.ResponseWriter, r *http.Request, req *syncRequest)
	requests []*syncRequest
}

func newTestHook(t *testing.T, answer func(req *syncRequest) any) *testHook {
	h := &testHook{}
	h.answer(answer)
	h.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		req := &syncRequest{}
		if err := json.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h.calls.Add(1)
		h.mu.Lock()
		h.requests = append(h.requests, req)
		handler := h.handler
		h.mu.Unlock()
		handler(w, r, req)
	}))
	t.Cleanup(h.server.Close)
	return h
}

// answer makes the hook answer 200 with answer(req) as JSON.
func (h *testHook) answer(answer func(req *syncRequest) any) {
	h.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer(req))
	})
}

func (h *testHook) setHandler(f func(w http.ResponseWriter, r *http.Request, req *syncRequest)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handler = f
}

func (h *testHook) lastRequest() *syncRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.requests) == 0 {
		return nil
	}
	return h.requests[len(h.requests)-1]
}

// compositeController returns a CompositeController object: parent things
// (or parentGVR), children configmaps, sync hook at h, then edit applies.
func compositeController(t *testing.T, h *testHook, parent schema.GroupVersionResource, edit func(spec map[string]any)) *unstructured.Unstructured {
	name := testLabel(t)
	spec := map[string]any{
		// Parents of other tests, in namespaces still being deleted, are
		// not this test's business.
		"parentResource": map[string]any{"apiVersion": parent.GroupVersion().String(), "resource": parent.Resource,
			"labelSelector": map[string]any{"matchLabels": map[string]any{"test": name}}},
		"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
		"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.server.URL + "/sync", "timeout": "2s"}}},
	}
	if edit != nil {
		edit(spec)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": name, "uid": "cc-" + name, "generation": int64(1)},
		"spec":       spec,
	}}
}

// testLabel is a name for the test usable as object name and label value.
func testLabel(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return strings.TrimRight(name, "-")
}

// startController runs a controller for cc until the test ends.
func startController(t *testing.T, cc *unstructured.Unstructured, mutate ...func(*composite.Options)) *composite.Controller {
	t.Helper()
	shared(t)
	opts := composite.Options{
		Client:    env.Dynamic,
		Objects:   objects,
		Resources: resources,
		Informers: informers,
		Hooks:     hookclient.NewClient(hookclient.Options{}),
		Recorder:  recorder,
		Workers:   4,
		// The tests of resyncAfterSeconds ask for tenths of a second.
		MinResyncAfter: time.Millisecond,
	}
	for _, m := range mutate {
		m(&opts)
	}
	c, err := composite.New(ctx(t), cc, opts)
	if err != nil {
		t.Fatalf("composite.New: %v", err)
	}
	if err := c.Start(ctx(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// newThing creates a parent whose spec.selector selects parent=<name>.
func newThing(t *testing.T, gvr schema.GroupVersionResource, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	kind := map[string]string{"things": "Thing", "plainthings": "PlainThing", "clusterthings": "ClusterThing"}[gvr.Resource]
	if spec == nil {
		spec = map[string]any{}
	}
	if _, ok := spec["selector"]; !ok {
		spec["selector"] = map[string]any{"matchLabels": map[string]any{"parent": name}}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace, "labels": map[string]any{"test": testLabel(t)}},
		"spec":       spec,
	}}
	created, err := env.Dynamic.Resource(gvr).Namespace(namespace).Create(ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s: %v", kind, name, err)
	}
	return created
}

// configMapChild is a desired ConfigMap child labelled for parent.
func configMapChild(parent *unstructured.Unstructured, name string, data map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"parent": parent.GetName()}},
		"data":       data,
	}
}

// valueHook answers every parent with one ConfigMap <parent>-cm holding
// spec.value, and status {value, children: <observed count>}.
func valueHook(req *syncRequest) any {
	value, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "value")
	observed := len(req.Children["ConfigMap.v1"])
	return map[string]any{
		"status":   map[string]any{"value": value, "children": observed},
		"children": []any{configMapChild(req.Parent, req.Parent.GetName()+"-cm", map[string]any{"value": value})},
	}
}

func get(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return env.Dynamic.Resource(gvr).Namespace(namespace).Get(ctx(t), name, metav1.GetOptions{})
}

// waitFor polls the object until check passes.
func waitFor(t *testing.T, gvr schema.GroupVersionResource, namespace, name, what string, check func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return controllertest.WaitFor(t, env, gvr, namespace, name, what, check)
}

func exists(obj *unstructured.Unstructured) bool { return obj != nil }
func gone(obj *unstructured.Unstructured) bool   { return obj == nil }

// dataValue reads data.value of a ConfigMap.
func dataValue(obj *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(obj.Object, "data", "value")
	return v
}

// statusField reads status.<field> of a parent.
func statusField(obj *unstructured.Unstructured, field string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", field)
	return v
}

// waitForEvent waits for an Event with reason on the named object whose
// message contains substr.
func waitForEvent(t *testing.T, namespace, objName, reason, substr string) {
	t.Helper()
	controllertest.EventMessage(t, env, namespace, objName, reason, substr)
}

// setSpec merge-patches the parent's spec.
func setSpec(t *testing.T, gvr schema.GroupVersionResource, namespace, name string, spec map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": spec})
	if _, err := env.Dynamic.Resource(gvr).Namespace(namespace).Patch(ctx(t), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (h *testHook) requestsSnapshot() []*syncRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*syncRequest(nil), h.requests...)
}

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }
