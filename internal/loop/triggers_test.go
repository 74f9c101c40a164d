package loop_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// recorder is a SyncFunc that records the triggers of each sync and
// returns, for each, the next of its results (nil once they run out);
// block, when set, holds every sync until it is closed.
type recorder struct {
	mu       sync.Mutex
	results  []result
	triggers [][]trigger.Trigger
	dropped  []int
	block    chan struct{}
	gone     func(call int) bool
}

type result struct {
	after time.Duration
	err   error
}

func (r *recorder) sync(_ context.Context, s *loop.Sync[string]) (time.Duration, error) {
	r.mu.Lock()
	r.triggers = append(r.triggers, s.Triggers())
	r.dropped = append(r.dropped, s.TriggersDropped())
	call := len(r.triggers)
	var res result
	if len(r.results) > 0 {
		res, r.results = r.results[0], r.results[1:]
	}
	block, gone := r.block, r.gone
	r.mu.Unlock()
	if block != nil {
		<-block
	}
	if gone != nil && gone(call) {
		s.Gone()
	}
	return res.after, res.err
}

func (r *recorder) syncs() [][]trigger.Trigger {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]trigger.Trigger(nil), r.triggers...)
}

// waitSyncs polls until n syncs have started and returns their triggers.
func (r *recorder) waitSyncs(t *testing.T, n int) [][]trigger.Trigger {
	t.Helper()
	poll(t, 10*time.Second, func() bool { return len(r.syncs()) >= n }, fmt.Sprintf("%d syncs", n))
	return r.syncs()
}

// newLoop returns a loop of one worker, not started; it stops when the
// test ends.
func newLoop(t *testing.T, opts loop.Options[string], sync loop.SyncFunc[string]) *loop.Loop[string] {
	opts.Name = t.Name()
	opts.Workers = 1
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, time.Second)
	}
	l := loop.New(opts, sync)
	t.Cleanup(l.Stop)
	return l
}

func run(t *testing.T, l *loop.Loop[string]) ktesting.Buffer {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
	l.Start(klog.NewContext(context.Background(), logger))
	return logger.GetSink().(ktesting.Underlier).GetBuffer()
}

func dependent(name string) trigger.Trigger {
	return trigger.Trigger{Cause: trigger.CauseDependent, Object: "configmaps/ns/" + name}
}

// TestTriggersGatheredWhileAKeyWaits: the triggers queued while a key
// waits are handed to its one sync, first first, each distinct one once.
func TestTriggersGatheredWhileAKeyWaits(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	spec := trigger.Trigger{Cause: trigger.CauseObject, Object: "pets/ns/a", Generation: 2}
	l.AddFor("ns/a", spec)
	l.AddFor("ns/a", dependent("c1"))
	l.AddFor("ns/a", spec)
	l.AddFor("ns/a", dependent("c1"))
	l.AddFor("ns/b", dependent("c2"))
	run(t, l)
	got := r.waitSyncs(t, 2)
	want := map[string][]trigger.Trigger{"ns/a": {spec, dependent("c1")}, "ns/b": {dependent("c2")}}
	for _, triggers := range got {
		if !reflect.DeepEqual(triggers, want["ns/a"]) && !reflect.DeepEqual(triggers, want["ns/b"]) {
			t.Errorf("a sync had triggers %v, want %v or %v", triggers, want["ns/a"], want["ns/b"])
		}
	}
	if n := testutil.ToFloat64(metrics.Syncs.WithLabelValues(t.Name(), "success", "object")); n != 1 {
		t.Errorf("metactl_syncs_total{trigger=object} = %v, want 1 (the sync of ns/a, whose first trigger it is)", n)
	}
	poll(t, 10*time.Second, func() bool {
		return testutil.ToFloat64(metrics.Syncs.WithLabelValues(t.Name(), "success", "dependent")) == 1
	}, "metactl_syncs_total{trigger=dependent} = 1 (ns/b), not counting ns/a's second trigger")
}

// TestTriggersAreBounded: a key keeps MaxTriggers distinct triggers and
// counts the others.
func TestTriggersAreBounded(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	var want []trigger.Trigger
	for i := range loop.MaxTriggers + 3 {
		d := dependent(fmt.Sprint("c", i))
		l.AddFor("ns/a", d)
		if i < loop.MaxTriggers {
			want = append(want, d)
		}
	}
	run(t, l)
	got := r.waitSyncs(t, 1)
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("triggers %v, want the first %d: %v", got[0], loop.MaxTriggers, want)
	}
	r.mu.Lock()
	dropped := r.dropped[0]
	r.mu.Unlock()
	if dropped != 3 {
		t.Errorf("%d triggers dropped, want 3", dropped)
	}
}

// TestTriggersQueuedDuringASyncAreTheNext: a trigger queued while its key
// is synced belongs to the sync that follows, not the running one.
func TestTriggersQueuedDuringASyncAreTheNext(t *testing.T) {
	r := &recorder{block: make(chan struct{})}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	run(t, l)
	l.AddFor("ns/a", changed)
	r.waitSyncs(t, 1)
	l.AddFor("ns/a", dependent("c1"))
	close(r.block)
	got := r.waitSyncs(t, 2)
	if want := [][]trigger.Trigger{{changed}, {dependent("c1")}}; !reflect.DeepEqual(got, want) {
		t.Errorf("syncs had triggers %v, want %v", got, want)
	}
}

// TestDelayedTriggerCountsWhenDue: a trigger queued with a delay is not
// taken by a sync that runs earlier for another cause, but by the sync at
// its time.
func TestDelayedTriggerCountsWhenDue(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	resyncAfter := trigger.Trigger{Cause: trigger.CauseResyncAfter}
	l.AddAfterFor("ns/a", 300*time.Millisecond, resyncAfter)
	l.AddFor("ns/a", changed)
	run(t, l)
	got := r.waitSyncs(t, 2)
	if want := [][]trigger.Trigger{{changed}, {resyncAfter}}; !reflect.DeepEqual(got, want) {
		t.Errorf("syncs had triggers %v, want %v", got, want)
	}
}

// TestDelayedTriggerNotLostBehindASoonerOne: the work queue keeps one
// delayed add per key, the soonest; a later one's trigger still gets its
// sync.
func TestDelayedTriggerNotLostBehindASoonerOne(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	run(t, l)
	l.AddAfterFor("ns/a", 50*time.Millisecond, trigger.Trigger{Cause: trigger.CauseRetry})
	l.AddAfterFor("ns/a", 300*time.Millisecond, trigger.Trigger{Cause: trigger.CauseResyncAfter})
	got := r.waitSyncs(t, 2)
	if want := [][]trigger.Trigger{{{Cause: trigger.CauseRetry}}, {{Cause: trigger.CauseResyncAfter}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("syncs had triggers %v, want %v", got, want)
	}
}

// TestLoopQueuesItsOwnCauses: a failed sync, a waiting one and a 429 are
// retried for CauseRetry; a sync's requeueAfter for CauseResyncAfter.
func TestLoopQueuesItsOwnCauses(t *testing.T) {
	tooMany := &hookclient.StatusError{Code: http.StatusTooManyRequests, RetryAfter: 20 * time.Millisecond}
	r := &recorder{results: []result{{err: errHook}, {err: loop.ErrWaiting}, {err: tooMany}, {after: 20 * time.Millisecond}}}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	run(t, l)
	l.AddFor("ns/a", changed)
	got := r.waitSyncs(t, 5)
	retry := []trigger.Trigger{{Cause: trigger.CauseRetry}}
	want := [][]trigger.Trigger{{changed}, retry, retry, retry, {{Cause: trigger.CauseResyncAfter}}}
	if !reflect.DeepEqual(got[:5], want) {
		t.Errorf("syncs had triggers %v, want %v", got, want)
	}
	if n := testutil.ToFloat64(metrics.Syncs.WithLabelValues(t.Name(), "error", "retry")); n != 1 {
		t.Errorf("metactl_syncs_total{result=error,trigger=retry} = %v, want 1 (the 429)", n)
	}
}

// TestGoneDropsDelayedTriggers: a sync that finds its object gone drops
// the retries and resyncs scheduled for it; the sync they would have
// caused does not run, and a later sync is not told of them.
func TestGoneDropsDelayedTriggers(t *testing.T) {
	const delay = 100 * time.Millisecond
	r := &recorder{
		results: []result{{after: delay}},
		gone:    func(call int) bool { return call == 2 },
	}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	run(t, l)
	l.AddFor("ns/a", changed) // 1: asks for a resync after delay
	r.waitSyncs(t, 1)
	deleted := trigger.Trigger{Cause: trigger.CauseObject, Object: "pets/ns/a"}
	l.AddFor("ns/a", deleted) // 2: finds it gone, before the resync is due
	r.waitSyncs(t, 2)
	due := time.Now().Add(delay)
	poll(t, 10*time.Second, func() bool { return time.Now().After(due.Add(delay)) }, "the resync's time passed")
	again := trigger.Trigger{Cause: trigger.CauseObject, Object: "pets/ns/a", Generation: 1}
	l.AddFor("ns/a", again) // 3: created again
	got := r.waitSyncs(t, 3)
	if want := [][]trigger.Trigger{{changed}, {deleted}, {again}}; !reflect.DeepEqual(got, want) {
		t.Errorf("syncs had triggers %v, want %v", got, want)
	}
}

// TestSyncsAreLoggedWithTheirTriggers: the V(4) "Synced" line and the
// failure's error line name the triggers.
func TestSyncsAreLoggedWithTheirTriggers(t *testing.T) {
	r := &recorder{results: []result{{err: errHook}}}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	logs := run(t, l)
	l.AddFor("ns/a", changed)
	r.waitSyncs(t, 2)
	want := map[string][]trigger.Trigger{"Sync failed; retrying": {changed}, "Synced": {{Cause: trigger.CauseRetry}}}
	poll(t, 10*time.Second, func() bool {
		found := 0
		for _, e := range logs.Data() {
			w, ok := want[e.Message]
			if !ok {
				continue
			}
			kv := e.ParameterKVList
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == "triggers" && reflect.DeepEqual(kv[i+1], w) {
					found++
				}
			}
		}
		return found == 2
	}, "a failure logged with its trigger, then the retry's success")
}

// TestTriggerString: the one format of a trigger, in logs and explain.
func TestTriggerString(t *testing.T) {
	for _, tc := range []struct {
		t    trigger.Trigger
		want string
	}{
		{trigger.Trigger{Cause: trigger.CauseRetry}, "retry"},
		{trigger.Trigger{Cause: trigger.CauseObject, Generation: 3}, "object (generation 3)"},
		{dependent("c1"), "dependent configmaps/ns/c1"},
		{trigger.Trigger{Cause: trigger.CauseObject, Object: "pets/ns/a", Generation: 2}, "object pets/ns/a (generation 2)"},
		{trigger.Trigger{Cause: trigger.CauseRelated, Object: trigger.ObjectName("namespaces", "", "ns")}, "related namespaces/ns"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestBoundKeepsADueTrigger: at MaxTriggers, the trigger due now that
// the queue's add stands for is kept, whether the delayed triggers came
// after it or before: else the sync, finding no trigger due, is skipped.
func TestBoundKeepsADueTrigger(t *testing.T) {
	r := &recorder{}
	l := newLoop(t, loop.Options[string]{}, r.sync)
	// ns/a: the due trigger first, then more delayed ones than fit.
	l.AddFor("ns/a", changed)
	for i := range loop.MaxTriggers {
		l.AddAfterFor("ns/a", time.Hour+time.Duration(i)*time.Second, dependent(fmt.Sprint("a", i)))
	}
	// ns/b: delayed ones filling the list, then the due trigger.
	for i := range loop.MaxTriggers {
		l.AddAfterFor("ns/b", time.Hour+time.Duration(i)*time.Second, dependent(fmt.Sprint("b", i)))
	}
	l.AddFor("ns/b", changed)
	run(t, l)
	got := r.waitSyncs(t, 2)
	for _, triggers := range got {
		if want := []trigger.Trigger{changed}; !reflect.DeepEqual(triggers, want) {
			t.Errorf("a sync had triggers %v, want %v", triggers, want)
		}
	}
}

// TestSuccessDropsPendingRetries: a sync that succeeds before the retry
// of an earlier failure is due takes that retry away: no sync labelled
// "retry" follows the success.
func TestSuccessDropsPendingRetries(t *testing.T) {
	r := &recorder{results: []result{{err: errHook}}}
	l := newLoop(t, loop.Options[string]{
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](400*time.Millisecond, time.Second),
	}, r.sync)
	run(t, l)
	l.AddFor("ns/a", changed)
	r.waitSyncs(t, 1)
	// Before the retry (400ms after the failure) is due.
	l.AddFor("ns/a", dependent("c1"))
	r.waitSyncs(t, 2)
	// The retry's time, and a margin for its sync to start: the retry
	// was due within 400ms of the second sync.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if got := r.syncs(); len(got) > 2 {
			t.Fatalf("syncs had triggers %v: a retry after the success", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSkippedSyncIsDroppedUncounted: a sync that returns ErrSkipped (its
// key not this process's now), asking for a requeue after a failure's
// retry, is not synced again: not retried, not requeued, its delayed
// triggers dropped; metactl_syncs_total does not count it. A key queued
// later (with one worker, synced after any such requeue was due) shows
// that the loop went on.
func TestSkippedSyncIsDroppedUncounted(t *testing.T) {
	var (
		mu     sync.Mutex
		synced []string
	)
	results := map[string][]error{"a": {errors.New("failing on purpose"), loop.ErrSkipped}}
	l, _ := start(t, loop.Options[string]{
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond),
	}, func(_ context.Context, s *loop.Sync[string]) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, s.Key)
		var err error
		if rs := results[s.Key]; len(rs) > 0 {
			err, results[s.Key] = rs[0], rs[1:]
		}
		if s.Key != "a" {
			return 0, err // z, the marker, once
		}
		// a's resync after a skip must be dropped with it.
		return time.Millisecond, err
	})
	count := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range synced {
			if k == key {
				n++
			}
		}
		return n
	}
	syncs := func(result, cause string) float64 {
		return testutil.ToFloat64(metrics.Syncs.WithLabelValues(t.Name(), result, cause))
	}
	// The counts before, for -count > 1.
	failedBefore, retriedBefore := syncs("error", "object"), syncs("success", "retry")+syncs("error", "retry")
	l.AddFor("a", changed)
	poll(t, 5*time.Second, func() bool { return count("a") == 2 }, "a failed, then its retry was skipped")
	l.AddAfterFor("z", 100*time.Millisecond, changed)
	poll(t, 5*time.Second, func() bool { return count("z") >= 1 }, "z synced")
	if n := count("a"); n != 2 {
		t.Errorf("a synced %d times, want 2: the skipped sync was followed by another", n)
	}
	if n := syncs("error", "object") - failedBefore; n != 1 {
		t.Errorf("metactl_syncs_total{result=error,trigger=object} rose by %v, want 1 (the failure)", n)
	}
	if n := syncs("success", "retry") + syncs("error", "retry") - retriedBefore; n != 0 {
		t.Errorf("metactl_syncs_total{trigger=retry} rose by %v, want 0: the skipped sync counted", n)
	}
}
