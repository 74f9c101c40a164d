package children

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestReportedOnceUntilExpiry(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := newReported(10, time.Hour, clock)
	if !r.first("parent-uid", "configmaps", "ns/a", "unknown field \"x\"") {
		t.Fatal("a first report is not reported")
	}
	for i := range 3 {
		if r.first("parent-uid", "configmaps", "ns/a", "unknown field \"x\"") {
			t.Fatalf("repeat %d is reported again", i)
		}
	}
	// Another parent, child or text is another report.
	for _, parts := range [][]string{
		{"other-uid", "configmaps", "ns/a", "unknown field \"x\""},
		{"parent-uid", "configmaps", "ns/b", "unknown field \"x\""},
		{"parent-uid", "secrets", "ns/a", "unknown field \"x\""},
		{"parent-uid", "configmaps", "ns/a", "unknown field \"y\""},
		// Parts are kept apart: "ns/a" + "b" is not "ns/ab".
		{"parent-uid", "configmaps", "ns/ab", "unknown field \"x\""},
	} {
		if !r.first(parts...) {
			t.Errorf("%q is taken for a report already made", parts)
		}
	}
	clock.Step(59 * time.Minute)
	if r.first("parent-uid", "configmaps", "ns/a", "unknown field \"x\"") {
		t.Error("reported again before its time to live")
	}
	clock.Step(2 * time.Minute)
	if !r.first("parent-uid", "configmaps", "ns/a", "unknown field \"x\"") {
		t.Error("not reported again once its time to live is over")
	}
}

func TestReportedIsBounded(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	r := newReported(3, time.Hour, clock)
	for i := range 4 {
		r.first(fmt.Sprint(i))
	}
	// The oldest is forgotten; the three latest are remembered.
	if !r.first("0") {
		t.Error("the least recent report is still remembered past the bound")
	}
	if r.first("3") {
		t.Error("a recent report is forgotten")
	}
}
