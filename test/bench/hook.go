package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// hookServer is the CompositeController's sync hook: each parent gets 3
// ConfigMaps <parent>-0..2 with data.value = spec.value, and the status
// {value: spec.value, children: <ConfigMaps observed>}.
type hookServer struct {
	url    string
	server *http.Server
	delay  time.Duration
	calls  atomic.Int64
	// conns counts the connections metactl opened to the hook.
	conns atomic.Int64

	// calls since the last take: parent, caller and time of each
	// (replicas.go reads them for the double-sync witness).
	mu      sync.Mutex
	records []hookCall
}

// replicaHeader is the request header in which metactl names the replica
// that calls (hookclient.ReplicaHeader).
const replicaHeader = "Metactl-Replica"

// hookCall is one call of the sync hook as the hook server saw it.
type hookCall struct {
	// Parent is namespace/name.
	Parent string
	// Replica is the Metactl-Replica header, "" when absent.
	Replica    string
	Start, End time.Time
}

type hookRequest struct {
	Parent struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Value string `json:"value"`
		} `json:"spec"`
	} `json:"parent"`
	Children map[string]map[string]json.RawMessage `json:"children"`
}

type hookChild struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   hookChildMeta     `json:"metadata"`
	Data       map[string]string `json:"data"`
}

type hookChildMeta struct {
	Name string `json:"name"`
}

type hookResponse struct {
	Status   map[string]any `json:"status"`
	Children []hookChild    `json:"children"`
}

// desiredChildren is what the hook answers for a parent.
func desiredChildren(parent, value string) []hookChild {
	out := make([]hookChild, childrenPerParent)
	for k := range out {
		out[k] = hookChild{
			APIVersion: "v1", Kind: "ConfigMap",
			Metadata: hookChildMeta{Name: childName(parent, k)},
			Data:     map[string]string{"value": value},
		}
	}
	return out
}

func childName(parent string, k int) string { return fmt.Sprintf("%s-%d", parent, k) }

func startHook(delay time.Duration) (*hookServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookServer{url: "http://" + ln.Addr().String(), delay: delay}
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

func (h *hookServer) sync(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
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
	if h.delay > 0 {
		time.Sleep(h.delay)
	}
	resp := hookResponse{
		Status: map[string]any{
			"value":    req.Parent.Spec.Value,
			"children": len(req.Children["ConfigMap.v1"]),
		},
		Children: desiredChildren(req.Parent.Metadata.Name, req.Parent.Spec.Value),
	}
	out, err := json.Marshal(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
	call := hookCall{Parent: req.Parent.Metadata.Namespace + "/" + req.Parent.Metadata.Name, Replica: r.Header.Get(replicaHeader), Start: start, End: time.Now()}
	h.mu.Lock()
	h.records = append(h.records, call)
	h.mu.Unlock()
}

// take returns the calls recorded since the last take and forgets them.
func (h *hookServer) take() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.records
	h.records = nil
	return out
}

func (h *hookServer) stop() {
	if h == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.server.Shutdown(ctx)
}
