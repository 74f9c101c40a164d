package main

import (
	"strings"
	"testing"
)

// agreeingCreate is a metactl create run of n parents whose counts agree.
func agreeingCreate(n float64) *PhaseResult {
	return &PhaseResult{
		Parents: int(n), HookCalls: 3 * n, HookCallsSeen: int64(3 * n),
		ObjectWrites:      map[string]float64{"create/child": 3 * n, "patch/status": n},
		ObjectWritesTotal: 4 * n,
		APIRequests:       map[string]float64{"POST/201": 3 * n, "PATCH/200": n, "GET/200": 2},
		APIWrites:         4 * n, APIMetricExported: true,
		ServerWrites: map[string]float64{"POST benchparents": n, "POST configmaps": 3 * n, "PATCH benchparents/status": n, "PUT leases": 2},
	}
}

func TestMetactlCountCheck(t *testing.T) {
	if c := metactlCountCheck("run 1", "create", agreeingCreate(200)); !c.Agree || c.ServerWrites != 800 {
		t.Fatalf("agreeing counts: %+v", c)
	}

	for name, spoil := range map[string]func(r *PhaseResult){
		"hook server saw fewer calls": func(r *PhaseResult) { r.HookCallsSeen-- },
		"object writes undercounted":  func(r *PhaseResult) { r.ObjectWritesTotal -= 5 },
		"API writes overcounted":      func(r *PhaseResult) { r.APIWrites++ },
		"server saw an extra write":   func(r *PhaseResult) { r.ServerWrites["PUT configmaps"] = 1 },
		"API metric not exported":     func(r *PhaseResult) { r.APIMetricExported = false },
	} {
		r := agreeingCreate(200)
		spoil(r)
		if c := metactlCountCheck("run 1", "create", r); c.Agree || c.Problem == "" {
			t.Errorf("%s: the check agrees: %+v", name, c)
		}
	}

	// Deleting: the benchmark deletes the parents and the garbage
	// collector the ConfigMaps; metactl writes nothing.
	del := &PhaseResult{Parents: 100, APIMetricExported: true, APIRequests: map[string]float64{"GET/200": 1},
		ServerWrites: map[string]float64{"DELETE benchparents": 100, "DELETE configmaps": 300}}
	if c := metactlCountCheck("run 1", "delete", del); !c.Agree {
		t.Errorf("delete: %s", c.Problem)
	}
	del.ServerWrites["DELETE configmaps"] = 301
	if c := metactlCountCheck("run 1", "delete", del); c.Agree {
		t.Errorf("delete with an extra ConfigMap delete agrees")
	}
}

func TestLimitCountCheck(t *testing.T) {
	server := map[string]float64{"POST benchparents": 10, "POST configmaps": 30, "PUT benchparents/status": 10, "PUT leases": 1}
	if c := limitCountCheck("16 writers", 10, 50, server); !c.Agree {
		t.Errorf("agreeing: %s", c.Problem)
	}
	if c := limitCountCheck("16 writers", 10, 51, server); c.Agree {
		t.Errorf("a write kube-apiserver did not count agrees")
	}
}

// A disagreement in one run fails the phase's target, and the benchmark.
func TestCountsDisagreementFails(t *testing.T) {
	b := &bench{result: newResult(options{n: 200, runs: 2}), limitAll: map[string][]*PhaseResult{}, metactlAll: map[string][]*PhaseResult{}}
	for rep, seen := range []int64{600, 599} {
		r := agreeingCreate(200)
		r.HookCallsSeen = seen
		r.Seconds = float64(rep + 1)
		r.Counts = metactlCountCheck("run", "create", r)
		b.metactlAll["create"] = append(b.metactlAll["create"], r)
		b.result.MetactlRuns["create"] = append(b.result.MetactlRuns["create"], RunSummary{Seconds: r.Seconds, Counts: r.Counts})
	}
	err := b.finish()
	if err == nil || !strings.Contains(err.Error(), "create counts agree") {
		t.Fatalf("finish: %v", err)
	}
	for _, tg := range b.result.Targets {
		if tg.Name == "create counts agree" && (tg.Status != "FAIL" || !strings.Contains(tg.Detail, "1 of 2 runs disagree")) {
			t.Errorf("target: %+v", tg)
		}
	}
}

func TestMedians(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3: %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4: %v", m)
	}
	runs := []*PhaseResult{{Seconds: 5}, {Seconds: 1}, {Seconds: 3}}
	if r := medianRun(runs); r.Seconds != 3 {
		t.Errorf("median run: %v", r.Seconds)
	}
}
