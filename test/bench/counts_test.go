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

// serverSideRun is a metactl run of n parents that applies its children
// server-side, as metactl and kube-apiserver count it: metactl's
// metactl_object_writes_total says patch/child, its client PATCH (201 when
// the apply created the child), kube-apiserver's apiserver_request_total
// verb APPLY.
func serverSideRun(phase string, n float64) *PhaseResult {
	r := &PhaseResult{
		Parents: int(n), HookCalls: 3 * n, HookCallsSeen: int64(3 * n),
		ObjectWrites:      map[string]float64{"patch/child": 3 * n, "patch/status": n},
		ObjectWritesTotal: 4 * n,
		APIRequests:       map[string]float64{"PATCH/201": 3 * n, "PATCH/200": n, "GET/200": 2},
		APIWrites:         4 * n, APIMetricExported: true,
		ServerWrites: map[string]float64{"APPLY configmaps": 3 * n, "PATCH benchparents/status": n, "PUT leases": 2},
	}
	if phase == "update" {
		r.APIRequests = map[string]float64{"PATCH/200": 4 * n}
	}
	r.ServerWrites[benchWrite[phase]] += n
	return r
}

// Server-side apply's writes are PATCH requests of metactl's client and
// APPLY in kube-apiserver's count: the three counts agree, the benchmark's
// own PATCH of each parent on update is told apart from them, and a
// missing or extra apply is a disagreement.
func TestMetactlCountCheckServerSideApply(t *testing.T) {
	for _, phase := range []string{"create", "update"} {
		r := serverSideRun(phase, 200)
		c := metactlCountCheck("run 1", phase, r)
		if !c.Agree || c.ServerWrites != 800 || c.Server["APPLY configmaps"] != 600 {
			t.Errorf("%s: %+v", phase, c)
		}
		if w, detail := r.apiWritesPerParent(phase); w != 4 || !strings.Contains(detail, "PATCH/201") && phase == "create" {
			t.Errorf("%s: API writes per parent %v (%s)", phase, w, detail)
		}
		// Where metactl does not export its API requests, kube-apiserver's
		// count (APPLY included) stands in.
		r.APIMetricExported = false
		if w, detail := r.apiWritesPerParent(phase); w != 4 || !strings.Contains(detail, "APPLY configmaps 3.00") {
			t.Errorf("%s: API writes per parent from kube-apiserver %v (%s)", phase, w, detail)
		}

		for name, spoil := range map[string]func(r *PhaseResult){
			"an apply kube-apiserver did not count": func(r *PhaseResult) { r.ServerWrites["APPLY configmaps"]-- },
			"an extra apply":                        func(r *PhaseResult) { r.ServerWrites["APPLY configmaps"]++ },
			"an extra PATCH of a parent":            func(r *PhaseResult) { r.ServerWrites["PATCH benchparents"]++ },
		} {
			r := serverSideRun(phase, 200)
			spoil(r)
			if c := metactlCountCheck("run 1", phase, r); c.Agree {
				t.Errorf("%s, %s: the check agrees: %+v", phase, name, c)
			}
		}
	}
}

// kube-apiserver counts a server-side apply with verb APPLY: it is a write.
func TestServerWritesCountsApply(t *testing.T) {
	s, err := parseText(strings.NewReader(`# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 600
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="bench.metactl.io",resource="benchparents",scope="resource",subresource="status",verb="PATCH",version="v1"} 200
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
`))
	if err != nil {
		t.Fatal(err)
	}
	got := serverWrites(s)
	want := map[string]float64{"APPLY configmaps": 630, "PATCH benchparents/status": 200}
	if len(got) != len(want) || got["APPLY configmaps"] != 630 || got["PATCH benchparents/status"] != 200 {
		t.Errorf("serverWrites: %v, want %v", got, want)
	}
	if w := onlyWrites(map[string]float64{"PATCH/201": 3, "PATCH/200": 1, "GET/200": 5}); w["PATCH/201"] != 3 || w["PATCH/200"] != 1 || len(w) != 2 {
		t.Errorf("onlyWrites: %v", w)
	}
}
