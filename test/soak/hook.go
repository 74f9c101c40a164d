package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The faults the hook injects, each with the same share of -fail-rate.
var faults = []string{"500", "timeout", "invalid-json", "slow"}

// hookTimeout is the webhook timeout of the CompositeController; the
// "timeout" fault answers after it, the "slow" fault within it.
const hookTimeout = 2 * time.Second

// hookServer is the CompositeController's sync hook: each parent gets
// childrenPerParent ConfigMaps <parent>-<k> with data.value = spec.value,
// and the status {value: spec.value, children: <ConfigMaps observed>}.
// With probability failRate a call fails instead (see faults).
type hookServer struct {
	url      string
	server   *http.Server
	failRate atomic.Uint64 // math.Float64bits
	calls    atomic.Int64
	mu       sync.Mutex
	injected map[string]int64
	conns    atomic.Int64 // connections metactl opened to the hook
}

type hookRequest struct {
	Parent struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Value string `json:"value"`
		} `json:"spec"`
	} `json:"parent"`
	Children map[string]map[string]json.RawMessage `json:"children"`
}

func childName(parent string, k int) string { return fmt.Sprintf("%s-%d", parent, k) }

func startHook(failRate float64) (*hookServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookServer{url: "http://" + ln.Addr().String(), injected: map[string]int64{}}
	h.setFailRate(failRate)
	mux := http.NewServeMux()
	mux.HandleFunc("/sync", h.sync)
	h.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				h.conns.Add(1)
			}
		}}
	go func() { _ = h.server.Serve(ln) }()
	return h, nil
}

func (h *hookServer) setFailRate(r float64) { h.failRate.Store(uint64(r * 1e6)) }

func (h *hookServer) fault() string {
	if rand.Float64()*1e6 >= float64(h.failRate.Load()) {
		return ""
	}
	f := faults[rand.IntN(len(faults))]
	h.mu.Lock()
	h.injected[f]++
	h.mu.Unlock()
	return f
}

// injectedCounts returns how many faults of each kind were injected.
func (h *hookServer) injectedCounts() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int64, len(h.injected))
	for k, v := range h.injected {
		out[k] = v
	}
	return out
}

// wait sleeps for d or until the caller hangs up.
func wait(r *http.Request, d time.Duration) {
	select {
	case <-r.Context().Done():
	case <-time.After(d):
	}
}

func (h *hookServer) sync(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req hookRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.calls.Add(1)
	switch h.fault() {
	case "500":
		http.Error(w, "soak: injected failure", http.StatusInternalServerError)
		return
	case "timeout":
		wait(r, hookTimeout+time.Second)
		http.Error(w, "soak: answered after the timeout", http.StatusInternalServerError)
		return
	case "invalid-json":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status": {"value": `))
		return
	case "slow":
		wait(r, hookTimeout/2)
	}
	children := make([]map[string]any, childrenPerParent)
	for k := range children {
		children[k] = map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": childName(req.Parent.Metadata.Name, k)},
			"data":     map[string]string{"value": req.Parent.Spec.Value},
		}
	}
	out, err := json.Marshal(map[string]any{
		"status":   map[string]any{"value": req.Parent.Spec.Value, "children": len(req.Children["ConfigMap.v1"])},
		"children": children,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func (h *hookServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.server.Shutdown(ctx)
}
