package shardtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReplicaHeader is the header that names the calling replica
// (hookclient.ReplicaHeader, docs/hooks.md), spelled out here: the test
// reads the protocol as a hook does.
const ReplicaHeader = "Metactl-Replica"

// Call is one hook call as the hook saw it.
type Call struct {
	// Parent is namespace/name, or name for a cluster-scoped parent.
	Parent string
	// Replica is the Metactl-Replica header ("" when missing).
	Replica string
	// Value is the parent's spec.value the call was made with.
	Value int64
	// Start is when the request arrived, End when the answer was written.
	Start, End time.Time
}

// Hook is the sync hook of the test's controllers: it answers a ConfigMap
// child per parent (for a cluster-scoped parent, one in each namespace of
// its spec.namespaces) with data.value = spec.value, and status
// observedValue = spec.value; it records every call.
type Hook struct {
	URL string

	mu    sync.Mutex
	calls []Call
}

// NewHook starts a Hook, stopped when t ends.
func NewHook(t testing.TB) *Hook {
	h := &Hook{}
	s := httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(s.Close)
	h.URL = s.URL
	return h
}

func (h *Hook) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req struct {
		Parent *unstructured.Unstructured `json:"parent"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Parent == nil {
		http.Error(w, "no parent in the request", http.StatusBadRequest)
		return
	}
	p := req.Parent
	value, _, _ := unstructured.NestedInt64(p.Object, "spec", "value")
	test := p.GetLabels()[TestLabel]
	child := func(ns string) map[string]any {
		meta := map[string]any{"name": p.GetName() + "-child", "labels": map[string]any{TestLabel: test}}
		if ns != "" {
			meta["namespace"] = ns
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
			"data": map[string]any{"value": itoa(value), "parent": p.GetName()}}
	}
	var children []any
	if p.GetNamespace() != "" {
		children = append(children, child(""))
	} else {
		namespaces, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "namespaces")
		for _, ns := range namespaces {
			children = append(children, child(ns))
		}
	}
	body, _ := json.Marshal(map[string]any{"status": map[string]any{"observedValue": value}, "children": children})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
	c := Call{Parent: key(p.GetNamespace(), p.GetName()), Replica: r.Header.Get(ReplicaHeader), Value: value, Start: start, End: time.Now()}
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
}

// Calls returns the calls so far, by start time.
func (h *Hook) Calls() []Call {
	h.mu.Lock()
	calls := slices.Clone(h.calls)
	h.mu.Unlock()
	slices.SortStableFunc(calls, func(a, b Call) int { return a.Start.Compare(b.Start) })
	return calls
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
