package main

import (
	"fmt"
	"maps"
	"strings"
)

// countCheck compares what one run of a phase did, as counted by
// independent witnesses. For metactl's runs: hook calls by metactl's
// metactl_hook_requests_total and by the hook server; writes by metactl's
// metactl_object_writes_total, by metactl's metactl_api_requests_total
// (write verbs) and by kube-apiserver's apiserver_request_total (on
// the parents and ConfigMaps, less the benchmark's own writes and, when
// deleting, the garbage collector's). For the limit's runs: the writes the
// limit client issued and those kube-apiserver counted.
type countCheck struct {
	Run     string `json:"run"`
	Parents int    `json:"parents"`
	// metactl's runs.
	HookCalls     float64 `json:"hookCalls,omitempty"`
	HookCallsSeen float64 `json:"hookCallsSeenByHook,omitempty"`
	ObjectWrites  float64 `json:"objectWrites,omitempty"`
	APIWrites     float64 `json:"apiWrites,omitempty"`
	// LeaseWrites, for replicas under leader election, are the write
	// requests of metactl_api_requests_total beyond its object writes,
	// at most the Lease writes kube-apiserver served in the phase (its
	// own and the control plane's included): APIWrites leaves them out.
	LeaseWrites float64 `json:"leaseWrites,omitempty"`
	// the limit's runs.
	Issued float64 `json:"issued,omitempty"`
	// ServerWrites is kube-apiserver's count of the writes the run is
	// checked against; Server holds them by "VERB resource[/subresource]".
	ServerWrites float64            `json:"serverWrites"`
	Server       map[string]float64 `json:"server,omitempty"`
	Agree        bool               `json:"agree"`
	Problem      string             `json:"problem,omitempty"`
}

// benchResources are the resources the benchmark's writes go to.
var benchResources = map[string]bool{"benchparents": true, "benchparents/status": true, "configmaps": true}

// benchResourceWrites keeps the writes kube-apiserver counted on the
// parents and the ConfigMaps (leaving out, for instance, its own lease
// renewals).
func benchResourceWrites(server map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range server {
		_, resource, _ := strings.Cut(k, " ")
		if benchResources[resource] && v != 0 {
			out[k] = v
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// limitCountCheck checks that kube-apiserver counted every write the
// limit client issued, and no other on the parents and ConfigMaps.
func limitCountCheck(run string, n int, issued float64, server map[string]float64) countCheck {
	s := benchResourceWrites(server)
	c := countCheck{Run: run, Parents: n, Issued: issued, Server: s, ServerWrites: total(s)}
	c.Agree = c.Issued == c.ServerWrites
	if !c.Agree {
		c.Problem = fmt.Sprintf("the limit client issued %.0f writes, kube-apiserver counted %.0f (%s)", c.Issued, c.ServerWrites, formatCounts(s, 1))
	}
	return c
}

// metactlCountCheck checks one run of a metactl phase.
func metactlCountCheck(run, phase string, r *PhaseResult) countCheck {
	n := float64(r.Parents)
	s := benchResourceWrites(r.ServerWrites)
	// The benchmark's own write of each parent; when deleting, the garbage
	// collector's delete of each ConfigMap.
	s[benchWrite[phase]] -= n
	if phase == "delete" {
		s["DELETE configmaps"] -= childrenPerParent * n
	}
	maps.DeleteFunc(s, func(_ string, v float64) bool { return v == 0 })
	c := countCheck{
		Run: run, Parents: r.Parents,
		HookCalls: r.HookCalls, HookCallsSeen: float64(r.HookCallsSeen),
		ObjectWrites: r.ObjectWritesTotal, APIWrites: r.APIWrites - r.LeaseWrites, LeaseWrites: r.LeaseWrites,
		Server: s, ServerWrites: total(s),
	}
	var problems []string
	if !r.APIMetricExported {
		problems = append(problems, "metactl does not export metactl_api_requests_total")
	}
	if c.HookCalls != c.HookCallsSeen {
		problems = append(problems, fmt.Sprintf("metactl counted %.0f hook calls, the hook server %.0f", c.HookCalls, c.HookCallsSeen))
	}
	if c.ObjectWrites != c.APIWrites || c.APIWrites != c.ServerWrites {
		problems = append(problems, fmt.Sprintf("writes: metactl_object_writes_total %.0f (%s), metactl_api_requests_total %.0f (%s), kube-apiserver %.0f (%s)",
			c.ObjectWrites, formatCounts(r.ObjectWrites, 1), c.APIWrites, formatCounts(onlyWrites(r.APIRequests), 1), c.ServerWrites, formatCounts(s, 1)))
	}
	for k, v := range s {
		if v < 0 {
			problems = append(problems, fmt.Sprintf("kube-apiserver counted fewer %s than the benchmark and the garbage collector make", k))
		}
	}
	c.Agree = len(problems) == 0
	c.Problem = strings.Join(problems, "; ")
	return c
}

// countsTarget is the PASS/FAIL line of one phase's checks, over every run.
func countsTarget(name string, checks []countCheck, metactl bool) Target {
	t := Target{Name: name, Status: "PASS", Value: float64(len(checks))}
	if len(checks) == 0 {
		t.Status, t.Value = "SKIP", 0
		return t
	}
	bad := 0
	var first *countCheck
	for i := range checks {
		if !checks[i].Agree {
			bad++
			if first == nil {
				first = &checks[i]
			}
		}
	}
	last := checks[len(checks)-1]
	n := float64(last.Parents)
	if metactl {
		t.Detail = fmt.Sprintf("hook calls %.2f/%.2f (metactl/hook server), writes %.2f/%.2f/%.2f (metactl objects/metactl API/kube-apiserver) per parent",
			last.HookCalls/n, last.HookCallsSeen/n, last.ObjectWrites/n, last.APIWrites/n, last.ServerWrites/n)
	} else {
		t.Detail = fmt.Sprintf("writes %.2f/%.2f (client/kube-apiserver) per parent", last.Issued/n, last.ServerWrites/n)
	}
	if bad == 0 {
		t.Detail = fmt.Sprintf("%d of %d runs: %s", len(checks), len(checks), t.Detail)
		return t
	}
	t.Status = "FAIL"
	t.Value = float64(len(checks) - bad)
	t.Detail = fmt.Sprintf("%d of %d runs disagree; %s: %s", bad, len(checks), first.Run, first.Problem)
	return t
}
