package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/metrics"
)

// TestStopCancelsSyncs stops a loop while a sync waits on its context:
// the context is cancelled with loop.ErrStopped, Stop returns once the
// sync does, and the cancelled sync is neither logged as a failure nor
// retried.
func TestStopCancelsSyncs(t *testing.T) {
	entered := make(chan struct{})
	cause := make(chan error, 1)
	l, logs := start(t, loop.Options[string]{StopGracePeriod: time.Minute}, func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		close(entered)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return 0, ctx.Err()
	})
	l.AddFor("a", changed)
	<-entered
	began := time.Now()
	l.Stop()
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("Stop took %v: the sync was not cancelled", d)
	}
	if err := <-cause; !errors.Is(err, loop.ErrStopped) {
		t.Errorf("the sync's context was cancelled with %v, want loop.ErrStopped", err)
	}
	if strings.Contains(logs.String(), "Sync failed") {
		t.Errorf("a cancelled sync was logged as failed:\n%s", logs.String())
	}
}

// TestStopAbandonsSyncsAfterTheGracePeriod stops a loop whose sync ignores
// its context: Stop returns after the grace period and logs the key.
func TestStopAbandonsSyncsAfterTheGracePeriod(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	l, logs := start(t, loop.Options[string]{StopGracePeriod: 300 * time.Millisecond}, func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		close(entered)
		<-release
		return 0, nil
	})
	l.AddFor("stuck", changed)
	<-entered
	began := time.Now()
	l.Stop()
	if d := time.Since(began); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("Stop returned after %v, want the grace period of 300ms", d)
	}
	if !strings.Contains(logs.String(), "abandoning") || !strings.Contains(logs.String(), "stuck") {
		t.Errorf("the abandoned sync is not logged:\n%s", logs.String())
	}
}

// queueGauges returns the work-queue gauges of metrics.Registry that have
// the series of the queue named name, with their values.
func queueGauges(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "metactl_workqueue_") || f.GetType().String() != "GAUGE" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					out[f.GetName()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// TestStopDeletesTheQueuesWorkInProgressGauges stops a loop while a sync
// runs: the queue's gauges of work in progress, which client-go sets every
// 500ms while the queue runs, are deleted rather than left at their last
// value (a sync that would look running for ever).
func TestStopDeletesTheQueuesWorkInProgressGauges(t *testing.T) {
	metrics.Register()
	entered := make(chan struct{})
	l, _ := start(t, loop.Options[string]{StopGracePeriod: time.Minute}, func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		close(entered)
		<-ctx.Done()
		return 0, ctx.Err()
	})
	l.AddFor("a", changed)
	<-entered
	gauges := []string{"metactl_workqueue_longest_running_processor_seconds", "metactl_workqueue_unfinished_work_seconds"}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := queueGauges(t, t.Name())
		if got[gauges[0]] > 0 && got[gauges[1]] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running sync does not show in the queue's gauges within 10s: %v", got)
		}
	}
	l.Stop()
	got := queueGauges(t, t.Name())
	for _, g := range gauges {
		if v, ok := got[g]; ok {
			t.Errorf("%s{name=%q} = %v once the loop stopped, want no series", g, t.Name(), v)
		}
	}
	if _, ok := got["metactl_workqueue_depth"]; !ok {
		t.Errorf("metactl_workqueue_depth{name=%q} is gone: only the gauges of work in progress are deleted", t.Name())
	}
}
