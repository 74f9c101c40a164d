package ruletest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Cluster is what a test of whole syncs without an API server runs a
// controller on: Options whose writes go to Objects (internal/inmemory's
// store, which its Client shares), whose informers hold the objects the
// cluster started with (their caches do not follow the writes: a test
// syncs each object once, with Engine.SyncOnce), and whose Events go to
// Recorder.
type Cluster struct {
	Objects  *inmemory.Objects
	Recorder *record.FakeRecorder
	Options  engine.Options
}

// NewCluster returns a Cluster that serves the resources of resources
// (withStatus those with a status subresource) and holds objs, in its
// store and its informers.
func NewCluster(resources *discovery.ResourceMap, withStatus []schema.GroupVersionResource, objs ...*unstructured.Unstructured) *Cluster {
	cached := map[schema.GroupVersionResource][]*unstructured.Unstructured{}
	for _, obj := range objs {
		gvr, _ := meta.UnsafeGuessKindToResource(obj.GroupVersionKind())
		cached[gvr] = append(cached[gvr], obj.DeepCopy())
	}
	objects := inmemory.NewObjects(withStatus, objs...)
	recorder := record.NewFakeRecorder(100)
	return &Cluster{Objects: objects, Recorder: recorder, Options: engine.Options{
		Client: objects.Client(), Objects: objects, Resources: resources,
		Informers: inmemory.Informers(cached), Hooks: hookclient.NewClient(hookclient.Options{}), Recorder: recorder,
	}}
}

// Events returns the Events recorded so far ("Type Reason message"),
// taking them from the recorder.
func (c *Cluster) Events() []string {
	var out []string
	for {
		select {
		case e := <-c.Recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Writes returns the writes the store served, as text (inmemory.Write).
func (c *Cluster) Writes() []string {
	var out []string
	for _, w := range c.Objects.Writes() {
		out = append(out, w.String())
	}
	return out
}

// Hook is an in-process hook (an HTTP server) that answers each request
// with what its answer function makes of it, JSON-encoded; an answer of
// type HTTPError is answered with that status instead.
type Hook struct {
	URL string

	mu       sync.Mutex
	answer   func(req map[string]any) any
	requests []map[string]any
}

// HTTPError is a hook's answer that fails with its HTTP status.
type HTTPError int

// NewHook starts a Hook, stopped when the test ends.
func NewHook(t *testing.T, answer func(req map[string]any) any) *Hook {
	t.Helper()
	h := &Hook{answer: answer}
	server := httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(server.Close)
	h.URL = server.URL
	return h
}

func (h *Hook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	answer := h.answer
	h.mu.Unlock()
	out := answer(req)
	if code, ok := out.(HTTPError); ok {
		http.Error(w, "failing on purpose", int(code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// Requests returns the requests the hook was sent, in order.
func (h *Hook) Requests() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.requests)
}

// Refused fails t unless err, a sync's error, contains want and the sync
// wrote nothing.
func (c *Cluster) Refused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the sync's error is %v, want one containing %q", err, want)
	}
	if w := c.Writes(); len(w) > 0 {
		t.Errorf("a refused sync wrote %v", w)
	}
}

// StartCaches starts the caches of r (engine.Runner.StartCaches), for
// its SyncOnce, and stops it when the test ends.
func StartCaches(t *testing.T, r engine.Runner) {
	t.Helper()
	if err := r.StartCaches(t.Context()); err != nil {
		t.Fatalf("StartCaches: %v", err)
	}
	t.Cleanup(r.Stop)
}
