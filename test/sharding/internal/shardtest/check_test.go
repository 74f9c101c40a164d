package shardtest

import (
	"strings"
	"testing"
	"time"
)

func TestDoubleSyncs(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	call := func(replica string, start, end int) Call {
		return Call{Parent: "ns/p", Replica: replica, Start: at(start), End: at(end)}
	}
	fleet := func(removedAt int) *Fleet {
		f := &Fleet{Replicas: []*Replica{{Identity: "a"}, {Identity: "b"}}}
		if removedAt >= 0 {
			f.Replicas[1].Removed = at(removedAt)
		}
		return f
	}
	for _, tc := range []struct {
		name    string
		calls   []Call
		removed int // ms; -1: none
		want    string
	}{
		{"one replica", []Call{call("a", 0, 10), call("a", 20, 30)}, -1, ""},
		{"a move", []Call{call("a", 0, 10), call("b", 20, 30), call("b", 40, 50)}, -1, ""},
		{"touching calls", []Call{call("a", 0, 10), call("b", 10, 20)}, -1, ""},
		{"overlap", []Call{call("a", 0, 10), call("b", 5, 20)}, -1, "overlapping calls by a"},
		{"one call inside another", []Call{call("a", 0, 100), call("b", 20, 30)}, -1, "overlapping calls by a"},
		{"a move back with no removal", []Call{call("a", 0, 10), call("b", 20, 30), call("a", 40, 50)}, -1, "called by a at 00:00:00.040 after the parent had moved from a"},
		{"a move back after a removal", []Call{call("a", 0, 10), call("b", 20, 30), call("a", 40, 50)}, 35, ""},
		{"a move back before the removal", []Call{call("a", 0, 10), call("b", 20, 30), call("a", 40, 50)}, 45, "after the parent had moved from a"},
		{"a stranger", []Call{call("c", 0, 10)}, -1, `Metactl-Replica "c"`},
		{"no header", []Call{call("", 0, 10)}, -1, `Metactl-Replica ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(DoubleSyncs(tc.calls, fleet(tc.removed), []string{"ns/p"}), "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
