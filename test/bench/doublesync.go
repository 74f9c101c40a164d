package main

import (
	"fmt"
	"slices"
	"time"
)

// HookCallers is the hook server's record of who called for which parent
// in one phase: the double-sync witness of the sharded runs. Each call
// names its replica in the Metactl-Replica header; a parent that two
// replicas work on at once shows as calls of two replicas that overlap in
// time, or as calls that go from one replica to another and back
// (interleaved). Handing a bucket over moves its parents from one replica
// to another once, after the first finished: neither.
type HookCallers struct {
	Calls int `json:"calls"`
	// Known is false when some call lacked the header, or when the
	// header told fewer replicas apart than called (Problem says which):
	// then nothing is known of double syncs (not zero).
	Known              bool   `json:"known"`
	Problem            string `json:"problem,omitempty"`
	CallsWithoutHeader int    `json:"callsWithoutHeader,omitempty"`
	// ByReplica counts the calls by header value; ByReplicaAgree says
	// whether these counts are the replicas' own counts of their calls
	// (metactl_hook_requests_total), as multisets (nil: not compared).
	ByReplica      map[string]int64 `json:"byReplica,omitempty"`
	ByReplicaAgree *bool            `json:"byReplicaAgree,omitempty"`
	// ParentsByManyReplicas is the parents called by two or more replicas
	// in the phase (a handover does that; reported, not judged).
	ParentsByManyReplicas int `json:"parentsByManyReplicas"`
	// Overlapping is the parents with calls of two replicas overlapping
	// in time; Interleaved those whose callers went A, B, A.
	Overlapping int `json:"overlapping"`
	Interleaved int `json:"interleaved"`
	// DoubleSyncs is the parents with overlapping or interleaved calls
	// (each once); Example describes the first.
	DoubleSyncs int    `json:"doubleSyncs"`
	Example     string `json:"example,omitempty"`
}

// analyzeCalls builds the record of calls.
func analyzeCalls(calls []hookCall) HookCallers {
	c := HookCallers{Calls: len(calls), ByReplica: map[string]int64{}}
	byParent := map[string][]hookCall{}
	for _, x := range calls {
		if x.Replica == "" {
			c.CallsWithoutHeader++
		} else {
			c.ByReplica[x.Replica]++
		}
		byParent[x.Parent] = append(byParent[x.Parent], x)
	}
	c.Known = c.CallsWithoutHeader == 0
	if !c.Known {
		c.Problem = fmt.Sprintf("%d of %d calls without the %s header", c.CallsWithoutHeader, c.Calls, replicaHeader)
		return c
	}
	for _, parent := range sortedKeys(byParent) {
		xs := byParent[parent]
		slices.SortFunc(xs, func(a, b hookCall) int { return a.Start.Compare(b.Start) })
		callers := map[string]bool{}
		for _, x := range xs {
			callers[x.Replica] = true
		}
		if len(callers) < 2 {
			continue
		}
		c.ParentsByManyReplicas++
		overlap, interleave := overlapping(xs), interleaved(xs)
		if overlap {
			c.Overlapping++
		}
		if interleave {
			c.Interleaved++
		}
		if overlap || interleave {
			c.DoubleSyncs++
			if c.Example == "" {
				c.Example = describeCalls(parent, xs)
			}
		}
	}
	return c
}

// overlapping reports whether calls of two replicas overlap in time; xs
// is sorted by start.
func overlapping(xs []hookCall) bool {
	for i := range xs {
		for j := i + 1; j < len(xs) && xs[j].Start.Before(xs[i].End); j++ {
			if xs[j].Replica != xs[i].Replica {
				return true
			}
		}
	}
	return false
}

// interleaved reports whether the callers, in order of start, return to a
// replica after another called: A, B, A.
func interleaved(xs []hookCall) bool {
	done := map[string]bool{}
	for i, x := range xs {
		if i > 0 && xs[i-1].Replica != x.Replica {
			if done[x.Replica] {
				return true
			}
			done[xs[i-1].Replica] = true
		}
	}
	return false
}

func describeCalls(parent string, xs []hookCall) string {
	t0 := xs[0].Start
	s := parent + ":"
	for _, x := range xs {
		s += fmt.Sprintf(" %s [%s, %s]", x.Replica, x.Start.Sub(t0).Round(time.Microsecond), x.End.Sub(t0).Round(time.Microsecond))
	}
	return s
}
