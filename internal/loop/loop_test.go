package loop_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// script is a SyncFunc that returns its results in order (nil once they
// run out) and records when each sync of each key started.
type script struct {
	mu      sync.Mutex
	results []error
	calls   []time.Time
}

func (s *script) sync(context.Context, *loop.Sync[string]) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, time.Now())
	if len(s.results) == 0 {
		return 0, nil
	}
	err := s.results[0]
	s.results = s.results[1:]
	return 0, err
}

func (s *script) callTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls...)
}

// waitCalls polls, with a deadline, until n syncs have started.
func (s *script) waitCalls(t *testing.T, n int, timeout time.Duration) []time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		calls := s.callTimes()
		if len(calls) >= n {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d syncs after %v, want %d", len(calls), timeout, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// start runs a loop of one worker with a logger whose entries the test
// reads; it stops when the test ends.
func start(t *testing.T, opts loop.Options[string], sync loop.SyncFunc[string]) (*loop.Loop[string], ktesting.Buffer) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
	opts.Name = t.Name()
	opts.Workers = 1
	l := loop.New(opts, sync)
	l.Start(klog.NewContext(context.Background(), logger))
	t.Cleanup(l.Stop)
	return l, logger.GetSink().(ktesting.Underlier).GetBuffer()
}

// retry is what a "retrying" log entry says.
type retry struct {
	key     string
	after   time.Duration
	attempt int
	err     error
}

// retries returns the entries of the log with message msg.
func retries(buf ktesting.Buffer, msg string) []retry {
	var out []retry
	for _, e := range buf.Data() {
		if e.Message != msg {
			continue
		}
		r := retry{err: e.Err}
		kv := e.ParameterKVList
		for i := 0; i+1 < len(kv); i += 2 {
			switch kv[i] {
			case "key":
				r.key, _ = kv[i+1].(string)
			case "after":
				r.after, _ = kv[i+1].(time.Duration)
			case "attempt":
				r.attempt, _ = kv[i+1].(int)
			}
		}
		out = append(out, r)
	}
	return out
}

var errHook = errors.New("hook unreachable")

// TestFailedSyncIsRetriedAfterTheLoggedDelay: each failure is logged with
// the delay the rate limiter gives and the attempt number, and the retry
// comes no sooner than that delay.
func TestFailedSyncIsRetriedAfterTheLoggedDelay(t *testing.T) {
	s := &script{results: []error{errHook, errHook, errHook}}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second)
	l, logs := start(t, loop.Options[string]{RateLimiter: limiter}, s.sync)
	l.AddFor("ns/a", changed)
	calls := s.waitCalls(t, 4, 10*time.Second)

	want := []retry{
		{key: "ns/a", after: 100 * time.Millisecond, attempt: 1, err: errHook},
		{key: "ns/a", after: 200 * time.Millisecond, attempt: 2, err: errHook},
		{key: "ns/a", after: 400 * time.Millisecond, attempt: 3, err: errHook},
	}
	got := retries(logs, "Sync failed; retrying")
	if len(got) != len(want) {
		t.Fatalf("logged %d retries, want %d:\n%s", len(got), len(want), logs.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("retry %d logged %+v, want %+v", i+1, got[i], want[i])
		}
		if gap := calls[i+1].Sub(calls[i]); gap < want[i].after {
			t.Errorf("retry %d came %v after the failure, before its delay %v", i+1, gap, want[i].after)
		}
	}
}

// TestMaxRetryDelayCapsTheBackoff: with MaxRetryDelay, a key whose rate
// limiter says an hour is retried within the cap, and the log says so.
func TestMaxRetryDelayCapsTheBackoff(t *testing.T) {
	s := &script{results: []error{errHook}}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour)
	l, logs := start(t, loop.Options[string]{RateLimiter: limiter, MaxRetryDelay: 50 * time.Millisecond}, s.sync)
	l.AddFor("ns/a", changed)
	s.waitCalls(t, 2, 10*time.Second)
	got := retries(logs, "Sync failed; retrying")
	if len(got) != 1 || got[0].after != 50*time.Millisecond {
		t.Errorf("logged retries %+v, want one after 50ms", got)
	}
}

// TestSuccessResetsTheBackoff: a success forgets the key's failures, so
// the next failure is retried after the first delay again, as attempt 1.
func TestSuccessResetsTheBackoff(t *testing.T) {
	s := &script{results: []error{errHook, errHook, nil, errHook}}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](20*time.Millisecond, 10*time.Second)
	l, logs := start(t, loop.Options[string]{RateLimiter: limiter}, s.sync)
	l.AddFor("ns/a", changed)
	s.waitCalls(t, 3, 10*time.Second)
	l.AddFor("ns/a", changed) // a change of the object after the success, which fails
	s.waitCalls(t, 5, 10*time.Second)
	got := retries(logs, "Sync failed; retrying")
	if len(got) != 3 {
		t.Fatalf("logged %d retries, want 3:\n%s", len(got), logs.String())
	}
	if got[2].attempt != 1 || got[2].after != 20*time.Millisecond {
		t.Errorf("the failure after a success logged %+v, want attempt 1 after 20ms", got[2])
	}
}

// TestWaitingIsRetriedWithBackoff: ErrWaiting goes through the same rate
// limiter, logged at V(4) and not as an error.
func TestWaitingIsRetriedWithBackoff(t *testing.T) {
	s := &script{results: []error{loop.ErrWaiting, loop.ErrWaiting}}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](30*time.Millisecond, 10*time.Second)
	l, logs := start(t, loop.Options[string]{RateLimiter: limiter}, s.sync)
	l.AddFor("a", changed)
	s.waitCalls(t, 3, 10*time.Second)
	got := retries(logs, "Waiting; retrying")
	if len(got) != 2 || got[0].after != 30*time.Millisecond || got[1].after != 60*time.Millisecond || got[1].attempt != 2 {
		t.Errorf("logged %+v, want retries after 30ms then 60ms (attempt 2)", got)
	}
	if failed := retries(logs, "Sync failed; retrying"); len(failed) != 0 {
		t.Errorf("waiting logged as a failure: %+v", failed)
	}
}

// TestNewRateLimiter: the default backoff starts at 250ms and doubles up to
// its cap; a cap below 250ms is also the first delay; no cap means
// MaxRetryDelay.
func TestNewRateLimiter(t *testing.T) {
	for _, tc := range []struct {
		max         time.Duration
		first, last time.Duration
	}{
		{max: 0, first: 250 * time.Millisecond, last: loop.MaxRetryDelay},
		{max: 5 * time.Second, first: 250 * time.Millisecond, last: 5 * time.Second},
		{max: 100 * time.Millisecond, first: 100 * time.Millisecond, last: 100 * time.Millisecond},
	} {
		limiter := loop.NewRateLimiter[string](tc.max)
		first := limiter.When("k")
		if second := limiter.When("k"); tc.first < tc.max && second != 2*first {
			t.Errorf("max %v: second delay %v, want twice the first %v", tc.max, second, first)
		}
		last := first
		for range 30 {
			last = limiter.When("k")
		}
		if first != tc.first || last != tc.last {
			t.Errorf("max %v: first delay %v, last %v; want %v, %v", tc.max, first, last, tc.first, tc.last)
		}
		limiter.Forget("k")
		if again := limiter.When("k"); again != tc.first {
			t.Errorf("max %v: after Forget, delay %v, want %v", tc.max, again, tc.first)
		}
	}
}

// TestRetryDelayInsideTheSync: a SyncFunc learns, before it returns its
// error, the delay the loop then retries after (for the parent's Event),
// the same one the log line gives; a 429's Retry-After is given as is;
// outside a loop there is none.
func TestRetryDelayInsideTheSync(t *testing.T) {
	var mu sync.Mutex
	var told []time.Duration
	tooMany := &hookclient.StatusError{Code: http.StatusTooManyRequests, RetryAfter: 40 * time.Millisecond}
	errs := []error{errHook, errHook, tooMany}
	calls := &script{}
	syncFunc := func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		_, _ = calls.sync(ctx, sync)
		mu.Lock()
		defer mu.Unlock()
		if len(errs) == 0 {
			return 0, nil
		}
		err := errs[0]
		errs = errs[1:]
		delay, ok := sync.RetryDelay(err)
		if !ok {
			t.Errorf("RetryDelay: no delay inside a sync")
		}
		// Asking twice counts one failure.
		if again, _ := sync.RetryDelay(err); again != delay {
			t.Errorf("RetryDelay said %v, then %v", delay, again)
		}
		told = append(told, delay)
		return 0, err
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](30*time.Millisecond, 10*time.Second)
	l, logs := start(t, loop.Options[string]{RateLimiter: limiter}, syncFunc)
	l.AddFor("ns/a", changed)
	calls.waitCalls(t, 4, 10*time.Second)

	mu.Lock()
	defer mu.Unlock()
	want := []time.Duration{30 * time.Millisecond, 60 * time.Millisecond, 40 * time.Millisecond}
	if len(told) != len(want) {
		t.Fatalf("RetryDelay said %v, want %v", told, want)
	}
	for i := range want {
		if told[i] != want[i] {
			t.Errorf("RetryDelay said %v, want %v", told, want)
			break
		}
	}
	got := retries(logs, "Sync failed; retrying")
	if len(got) != 2 || got[0].after != told[0] || got[1].after != told[1] || got[1].attempt != 2 {
		t.Errorf("logged %+v, want the delays RetryDelay gave, %v then %v", got, told[0], told[1])
	}
	if _, ok := (*loop.Sync[string])(nil).RetryDelay(errHook); ok {
		t.Errorf("RetryDelay outside a loop's sync gave a delay")
	}
}

// TestRetryAttemptInsideTheSync: a SyncFunc learns, with the delay, how
// many syncs in a row have failed, this one included; a 429, which the
// backoff does not count, is one more than those before it; a success
// starts again from 1.
func TestRetryAttemptInsideTheSync(t *testing.T) {
	var mu sync.Mutex
	var attempts []int
	tooMany := &hookclient.StatusError{Code: http.StatusTooManyRequests, RetryAfter: 20 * time.Millisecond}
	errs := []error{errHook, errHook, tooMany, nil, errHook}
	calls := &script{}
	syncFunc := func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		_, _ = calls.sync(ctx, sync)
		mu.Lock()
		defer mu.Unlock()
		if len(errs) == 0 {
			return 0, nil
		}
		err := errs[0]
		errs = errs[1:]
		if err == nil {
			return 10 * time.Millisecond, nil
		}
		delay, attempt, ok := sync.Retry(err)
		if !ok || delay <= 0 {
			t.Errorf("Retry: delay %v, ok %v inside a sync", delay, ok)
		}
		attempts = append(attempts, attempt)
		return 0, err
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, 10*time.Second)
	l, _ := start(t, loop.Options[string]{RateLimiter: limiter}, syncFunc)
	l.AddFor("ns/a", changed)
	calls.waitCalls(t, 6, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 3, 1}; !slices.Equal(attempts, want) {
		t.Errorf("attempts %v, want %v", attempts, want)
	}
	if _, _, ok := (*loop.Sync[string])(nil).Retry(errHook); ok {
		t.Errorf("Retry outside a loop's sync gave a delay")
	}
}

// TestTooManyRequestsWaitsForRetryAfter: a sync failing with a hook's 429
// is retried after its Retry-After, not after the backoff's shorter delay,
// even beyond MaxRetryDelay; it does not count as a failure of the
// backoff, so the next ordinary failure still gets the first delay.
func TestTooManyRequestsWaitsForRetryAfter(t *testing.T) {
	const retryAfter = 400 * time.Millisecond
	tooMany := &hookclient.StatusError{Code: http.StatusTooManyRequests, RetryAfter: retryAfter}
	s := &script{results: []error{tooMany, errHook}}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, 10*time.Second)
	l, logs := start(t, loop.Options[string]{RateLimiter: limiter, MaxRetryDelay: 50 * time.Millisecond}, s.sync)
	l.AddFor("ns/a", changed)
	calls := s.waitCalls(t, 3, 10*time.Second)
	if gap := calls[1].Sub(calls[0]); gap < retryAfter {
		t.Errorf("the sync after a 429 came %v after it, before its Retry-After %v", gap, retryAfter)
	} else if gap > retryAfter+time.Second {
		t.Errorf("the sync after a 429 came %v after it, long after its Retry-After %v", gap, retryAfter)
	}
	got := retries(logs, "Sync failed; retrying")
	if len(got) != 1 || got[0].attempt != 1 || got[0].after != 10*time.Millisecond {
		t.Errorf("logged %+v, want the failure after the 429 as attempt 1 after 10ms", got)
	}
	if later := retries(logs, "Hook asked to retry later"); len(later) != 1 || later[0].after != retryAfter {
		t.Errorf("logged %+v, want one 429 retried after %v", later, retryAfter)
	}
}

// TestDocumentedBackoff pins what the README and --help say: by default a
// failing sync is retried after 250ms, then 500ms, 1s, ... doubling up to
// 2 minutes, never more.
func TestDocumentedBackoff(t *testing.T) {
	if loop.MaxRetryDelay != 2*time.Minute {
		t.Errorf("MaxRetryDelay = %v, documented as 2m", loop.MaxRetryDelay)
	}
	limiter := loop.DefaultRateLimiter[string]()
	want := 250 * time.Millisecond
	for i := range 20 {
		if got := limiter.When("k"); got != want {
			t.Fatalf("failure %d: delay %v, want %v", i+1, got, want)
		}
		want = min(2*want, 2*time.Minute)
	}

	// A loop built without a RateLimiter uses it.
	s := &script{results: []error{errHook, errHook}}
	l, logs := start(t, loop.Options[string]{}, s.sync)
	l.AddFor("ns/a", changed)
	calls := s.waitCalls(t, 3, 10*time.Second)
	got := retries(logs, "Sync failed; retrying")
	if len(got) != 2 || got[0].after != 250*time.Millisecond || got[1].after != 500*time.Millisecond {
		t.Errorf("logged %+v, want retries after 250ms then 500ms", got)
	}
	for i, wait := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond} {
		if gap := calls[i+1].Sub(calls[i]); gap < wait {
			t.Errorf("retry %d came %v after the failure, before %v", i+1, gap, wait)
		}
	}
}

// TestWorkersBoundsSyncsInFlight: with Workers 3 and 10 keys whose syncs
// block, exactly 3 run at once; the others start as those end, and every
// key is synced.
func TestWorkersBoundsSyncsInFlight(t *testing.T) {
	const workers, keys = 3, 10
	var (
		mu                sync.Mutex
		inFlight, maxSeen int
		done              int
	)
	release := make(chan struct{})
	l := loop.New(loop.Options[string]{Name: t.Name(), Workers: workers}, func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		mu.Lock()
		inFlight++
		maxSeen = max(maxSeen, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		done++
		mu.Unlock()
		return 0, nil
	})
	for i := range keys {
		l.AddFor(string(rune('a'+i)), changed)
	}
	l.Start(context.Background())
	t.Cleanup(l.Stop)
	snapshot := func() (int, int, int) {
		mu.Lock()
		defer mu.Unlock()
		return inFlight, maxSeen, done
	}
	deadline := time.Now().Add(5 * time.Second)
	for n, _, _ := snapshot(); n < workers; n, _, _ = snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("%d syncs in flight after 5s, want %d", n, workers)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for _, _, d := snapshot(); d < keys; _, _, d = snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d keys synced after 5s", d, keys)
		}
		time.Sleep(time.Millisecond)
	}
	if _, m, _ := snapshot(); m != workers {
		t.Errorf("at most %d syncs ran at once, want %d", m, workers)
	}
}

// TestDefaultWorkers pins the documented default.
func TestDefaultWorkers(t *testing.T) {
	if loop.DefaultWorkers != 256 {
		t.Errorf("DefaultWorkers = %d, documented as 256", loop.DefaultWorkers)
	}
}

var _ loop.DelayedRetry = (*hookclient.StatusError)(nil)

// TestWaitingSyncsGiveUpTheirTurn: with Active 1, syncs waiting in
// WhileWaiting do not hold the one turn, and each sync that waited on its
// hook longer than it then waited for its turn lets one more sync in:
// three wait at once. Outside their waits they never run two at once.
func TestWaitingSyncsGiveUpTheirTurn(t *testing.T) {
	const keys = 3
	var (
		mu                 sync.Mutex
		waiting, running   int
		maxRunning, synced int
	)
	release := make(chan struct{})
	step := func(d *int, by int) {
		mu.Lock()
		defer mu.Unlock()
		*d += by
		if running > maxRunning {
			maxRunning = running
		}
	}
	l := loop.New(loop.Options[string]{Name: t.Name(), Workers: keys, Active: 1}, func(ctx context.Context, sync *loop.Sync[string]) (time.Duration, error) {
		step(&running, 1)
		step(&running, -1)
		// A hook that keeps the sync waiting longer than for its turn
		// (free): the window opens by one.
		sync.WhileWaiting(func() { time.Sleep(20 * time.Millisecond) })
		sync.WhileWaiting(func() {
			step(&waiting, 1)
			<-release
			step(&waiting, -1)
		})
		step(&running, 1)
		time.Sleep(time.Millisecond) // give an overlap a chance to show
		step(&running, -1)
		step(&synced, 1)
		return 0, nil
	})
	for i := range keys {
		l.AddFor(string(rune('a'+i)), changed)
	}
	l.Start(context.Background())
	t.Cleanup(l.Stop)
	read := func(v *int) int { mu.Lock(); defer mu.Unlock(); return *v }
	poll(t, 5*time.Second, func() bool { return read(&waiting) == keys }, "three syncs waiting at once with one turn")
	close(release)
	poll(t, 5*time.Second, func() bool { return read(&synced) == keys }, "every sync done")
	if m := read(&maxRunning); m != 1 {
		t.Errorf("%d syncs ran at once outside their waits, Active 1", m)
	}
}

// poll waits, up to timeout, for cond.
func poll(t *testing.T, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// changed is the trigger of the tests' adds.
var changed = trigger.Trigger{Cause: trigger.CauseObject}
