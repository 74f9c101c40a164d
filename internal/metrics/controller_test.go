package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesOf returns, by family, the series of Registry that carry the
// label name with value.
func seriesOf(t *testing.T, label, value string) map[string]int {
	t.Helper()
	families, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					out[f.GetName()]++
				}
			}
		}
	}
	return out
}

// TestForgetController: once a controller is gone, ForgetController
// deletes every series labelled with its name, from every vector with a
// controller label and from its work queue's, and leaves another
// controller's.
func TestForgetController(t *testing.T) {
	Register()
	for _, name := range []string{"forget-gone", "forget-kept"} {
		ObserveHookCall(name, "sync", 200, time.Millisecond)
		ObserveHookCall(name, "sync", 0, time.Millisecond)
		Syncs.WithLabelValues(name, "success", "object").Inc()
		UnsettledSyncs.WithLabelValues(name).Inc()
		SyncDuration.WithLabelValues(name).Observe(1)
		ObjectWrites.WithLabelValues(name, "create", "child").Inc()
		UncachedReads.WithLabelValues(name, "adopt").Inc()
		ControllerReady.WithLabelValues("CompositeController", name).Set(1)
		ControllerReady.WithLabelValues("DecoratorController", name).Set(0)
		HookTimeout.WithLabelValues(name, "sync").Set(10)
		q := queueMetrics{}
		q.NewDepthMetric(name).Inc()
		q.NewAddsMetric(name).Inc()
		q.NewLatencyMetric(name).Observe(1)
		q.NewWorkDurationMetric(name).Observe(1)
		q.NewUnfinishedWorkSecondsMetric(name).Set(1)
		q.NewLongestRunningProcessorSecondsMetric(name).Set(1)
		q.NewRetriesMetric(name).Inc()
	}
	before := seriesOf(t, "controller", "forget-gone")
	queueBefore := seriesOf(t, "name", "forget-gone")
	// Every family with a controller label (9) and every work-queue
	// family (7) has series of it.
	if len(before) != 9 || len(queueBefore) != 7 {
		t.Fatalf("before: series in %v and %v, want 9 and 7 families", before, queueBefore)
	}
	ForgetController("forget-gone")
	if got := seriesOf(t, "controller", "forget-gone"); len(got) != 0 {
		t.Errorf("series of the forgotten controller left: %v", got)
	}
	if got := seriesOf(t, "name", "forget-gone"); len(got) != 0 {
		t.Errorf("series of the forgotten controller's queue left: %v", got)
	}
	if got := seriesOf(t, "controller", "forget-kept"); len(got) != len(before) {
		t.Errorf("the other controller's series: %v, want as many families as %v", got, before)
	}
	ForgetController("forget-kept")
}

// TestHookCodeIsBounded: the code label of metactl_hook_requests_total
// takes the statuses net/http names as numbers and every other status
// as "other", so a hook cannot make a series per status it invents.
func TestHookCodeIsBounded(t *testing.T) {
	for code, want := range map[int]string{0: "error", 200: "200", 304: "304", 412: "412", 429: "429", 503: "503",
		299: "other", 600: "other", 999: "other", 100: "100", 599: "other"} {
		if got := HookCode(code); got != want {
			t.Errorf("HookCode(%d) = %q, want %q", code, got, want)
		}
	}
	Register()
	for code := 100; code <= 999; code++ {
		ObserveHookCall("bounded-codes", "sync", code, time.Millisecond)
	}
	defer ForgetController("bounded-codes")
	n := seriesOf(t, "controller", "bounded-codes")["metactl_hook_requests_total"]
	if n > 70 {
		t.Errorf("a hook answering every status 100-999 made %d series of metactl_hook_requests_total, want at most 70", n)
	}
	var other float64
	families, _ := Registry.Gather()
	for _, f := range families {
		if f.GetName() != "metactl_hook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := prometheus.Labels{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == "bounded-codes" && labels["code"] == "other" {
				other = m.GetCounter().GetValue()
			}
		}
	}
	if other < 800 {
		t.Errorf("code=\"other\" counted %v calls, want the 800 or more of statuses net/http does not name", other)
	}
}
