package children

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
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

func TestReportWarningsOncePerChildAndText(t *testing.T) {
	events := record.NewFakeRecorder(10)
	w := &Writer{Recorder: events, reported: newReported(10, time.Hour, clocktesting.NewFakeClock(time.Now()))}
	w.reportedOnce.Do(func() {})
	res := &Resource{Resource: &discovery.Resource{APIVersion: "apps/v1", Name: "deployments", Kind: "Deployment", Namespaced: true}}
	parent := &unstructured.Unstructured{}
	parent.SetUID("p-uid")
	parent.SetNamespace("ns")
	child := &unstructured.Unstructured{}
	child.SetNamespace("ns")
	child.SetName("web")
	ctx := context.Background()

	w.reportWarnings(ctx, parent, res, "create", child, []string{`unknown field "spec.replcas"`})
	// The same warning on a later write (an update, say) is not repeated.
	w.reportWarnings(ctx, parent, res, "update", child, []string{`unknown field "spec.replcas"`})
	// A new one is, alone.
	w.reportWarnings(ctx, parent, res, "update", child, []string{`unknown field "spec.replcas"`, `unknown field "spec.templat"`})
	// Many are listed up to a bound.
	var many []string
	for i := range maxWarningsInEvent + 2 {
		many = append(many, fmt.Sprintf("warning %d", i))
	}
	w.reportWarnings(ctx, parent, res, "delete", child, many)

	want := []string{
		`Warning ChildWriteWarning the API server warned on the creation of child Deployment web: unknown field "spec.replcas" (the API server drops unknown fields: check the field's name and place against the Deployment schema)`,
		`Warning ChildWriteWarning the API server warned on the update of child Deployment web: unknown field "spec.templat" (the API server drops unknown fields: check the field's name and place against the Deployment schema)`,
		`Warning ChildWriteWarning the API server warned on the deletion of child Deployment web: warning 0; warning 1; warning 2; warning 3; warning 4; and 2 more (in metactl's log)`,
	}
	for i, wantEvent := range want {
		select {
		case got := <-events.Events:
			if got != wantEvent {
				t.Errorf("Event %d:\n got %s\nwant %s", i, got, wantEvent)
			}
		default:
			t.Fatalf("Event %d missing: %s", i, wantEvent)
		}
	}
	select {
	case got := <-events.Events:
		t.Errorf("unexpected Event %s", got)
	default:
	}
}
