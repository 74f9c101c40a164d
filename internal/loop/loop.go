package loop

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/elastic"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/trigger"
)

// SyncFunc syncs the object named by s.Key; s is the sync as the loop runs
// it (its triggers, its retry, its waits on hooks). A positive
// requeueAfter asks for another sync after that delay.
type SyncFunc[K comparable] func(ctx context.Context, s *Sync[K]) (requeueAfter time.Duration, err error)

// Options configure a Loop of keys of type K.
type Options[K comparable] struct {
	// Name labels the queue's metrics and the sync metrics (the
	// controller's name).
	Name string
	// Workers is the most keys synced at once, counting the syncs that
	// wait on a hook (see Sync.WhileWaiting); default DefaultWorkers. The
	// syncs in flight are bounded by a window that adapts between Active
	// and Workers (see window): it opens while syncs wait longer on their
	// hooks than for a turn when they come back (a slow hook), and closes
	// when they wait longer for the turn. Worker goroutines are started when keys wait and end
	// when idle, so an idle loop holds none.
	Workers int
	// Active is the most of those syncs that run at once outside
	// Sync.WhileWaiting: decoding, checking answers, writing; default
	// DefaultActive(), and never more than Workers. A sync that returns from
	// a wait is resumed before a new sync starts, so syncs pile up only
	// where the wait is long (a slow hook) and not behind the API server.
	Active int
	// Share, when set, holds the turns of Active that this loop shares
	// with the other loops given it, by its rule of fairness (see Share):
	// the process's bound on the active syncs of all its controllers.
	// Default nil: a Share of Active turns of the loop's own.
	Share *Share
	// RateLimiter spaces the retries of failing keys; default
	// NewRateLimiter(MaxRetryDelay).
	RateLimiter workqueue.TypedRateLimiter[K]
	// MaxRetryDelay, when positive, caps the delay before a failing key is
	// retried, whatever RateLimiter says. It does not shorten the delay a
	// hook asks for with 429 Retry-After.
	MaxRetryDelay time.Duration
	// StopGracePeriod is the longest Stop waits for the syncs in flight,
	// whose context it cancels first; default DefaultStopGracePeriod.
	// Syncs still running then are abandoned: Stop logs their keys and
	// returns.
	StopGracePeriod time.Duration
}

// DefaultStopGracePeriod is the default of Options.StopGracePeriod: as
// long as the default hook timeout, so that a sync whose hook call ignores
// the cancellation still ends within it.
const DefaultStopGracePeriod = 10 * time.Second

// ErrStopped is the cause of the cancellation of a sync's context by Stop
// (context.Cause).
var ErrStopped = errors.New("the controller stopped")

// DefaultWorkers is the default of Options.Workers. A sync with a slow
// hook spends most of its time waiting on it: a hook that takes 100ms,
// called by 256 syncs at once, answers 2,560 calls a second, more than one
// API server takes the writes of, so the API server, not the hook's
// latency, sets the pace (a fixed 32 made 1,000 new parents wait 9.4s for
// such a hook alone). With a fast hook the window stays near Active.
const DefaultWorkers = 256

// DefaultActive returns the default of Options.Active, the syncs that run
// at once when none waits on its hook: activePerCPU for each CPU the
// process may use (GOMAXPROCS), and at least minActive, as many as the
// fixed workers of earlier versions (so 32 up to 4 CPUs).
//
// Why it grows with the CPUs: an active sync spends most of its turn
// waiting on the API server's answers to its writes, not on a CPU (on the
// benchmark's 2 cores, metactl's CPU is about a tenth of a sync's
// duration). A controller so completes about Active syncs per sync
// duration (Little's law): a fixed 32, at the 10-13 ms a sync took against
// a loaded 16-core API server, caps it near 2,500 to 3,200 syncs a second,
// below the writes that server takes from 64 writers (issue 29: metactl
// stayed at 1.3-1.5 times the server's limit with no client-side rate
// limit). With more CPUs metactl can do more syncs' CPU work at once, so
// the bound rises with them; on a machine of 4 CPUs or fewer, such as the
// 2-core benchmark, it is 32 as before.
func DefaultActive() int {
	return max(minActive, activePerCPU*runtime.GOMAXPROCS(0))
}

// minActive and activePerCPU: see DefaultActive.
const (
	minActive    = 32
	activePerCPU = 8
)

// MaxRetryDelay is the default cap of the backoff of a failing key: a hook
// that recovers is called again within this long.
const MaxRetryDelay = 2 * time.Minute

// DefaultRateLimiter is NewRateLimiter(MaxRetryDelay).
func DefaultRateLimiter[K comparable]() workqueue.TypedRateLimiter[K] {
	return NewRateLimiter[K](MaxRetryDelay)
}

// NewRateLimiter returns the retry spacing of failing keys: exponential per
// key from 250ms (250ms, 500ms, 1s, ...), capped at maxDelay (MaxRetryDelay
// when not positive), and at most 50 retries a second overall with bursts
// of 300. Each controller needs its own: it counts failures per key.
func NewRateLimiter[K comparable](maxDelay time.Duration) workqueue.TypedRateLimiter[K] {
	if maxDelay <= 0 {
		maxDelay = MaxRetryDelay
	}
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[K](min(250*time.Millisecond, maxDelay), maxDelay),
		&workqueue.TypedBucketRateLimiter[K]{Limiter: rate.NewLimiter(50, 300)},
	)
}

// Loop is a work queue and the syncs of its keys, of type K.
type Loop[K comparable] struct {
	opts  Options[K]
	sync  SyncFunc[K]
	queue workqueue.TypedRateLimitingInterface[K]
	// slots bounds the syncs in flight.
	slots *window
	// active gives Options.Active turns to run outside Sync.WhileWaiting,
	// of Options.Share.
	active *gate
	// workers run the syncs; the dispatcher closes it as it stops, and
	// idle workers exit.
	workers *elastic.Pool
	// running counts the dispatcher.
	running sync.WaitGroup
	// stopped is cancelled by Stop (stop), with ErrStopped, and with it
	// the syncs' context.
	stopped context.Context
	stop    context.CancelCauseFunc
	// logger is Start's.
	logger klog.Logger
	// pending are the triggers of the keys queued.
	pending pending[K]
	// inFlight holds the keys being synced, and since when.
	inFlightMu sync.Mutex
	inFlight   map[K]time.Time
	stopOnce   sync.Once
}

// workerIdleTimeout is how long a worker waits for another key before it
// exits.
const workerIdleTimeout = 5 * time.Second

// New returns a Loop that calls sync for each key; nothing runs until Start.
// Keys may be added before Start.
func New[K comparable](opts Options[K], sync SyncFunc[K]) *Loop[K] {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Active <= 0 {
		opts.Active = DefaultActive()
	}
	opts.Active = min(opts.Active, opts.Workers)
	if opts.RateLimiter == nil {
		opts.RateLimiter = NewRateLimiter[K](opts.MaxRetryDelay)
	}
	if opts.StopGracePeriod <= 0 {
		opts.StopGracePeriod = DefaultStopGracePeriod
	}
	share := opts.Share
	if share == nil {
		share = NewShare(opts.Active)
	}
	stopped, stop := context.WithCancelCause(context.Background())
	return &Loop[K]{
		stopped:  stopped,
		stop:     stop,
		logger:   klog.Background(),
		inFlight: map[K]time.Time{},
		active:   newGate(share, opts.Active),
		slots:    newWindow(opts.Active, opts.Workers),
		opts:     opts,
		sync:     sync,
		workers:  elastic.New(workerIdleTimeout),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[K]{Name: opts.Name}),
	}
}

// Start starts taking keys from the queue, at most Options.Workers syncs at
// once. A key is handed to an idle worker goroutine, or to a new one when
// none is idle; a worker idle for workerIdleTimeout exits, so an idle loop
// holds no worker (and a worker keeps the stack it grew for the next
// sync). Syncs run with ctx's values but not its cancellation: their
// context is cancelled by Stop. Start must be called once.
func (l *Loop[K]) Start(ctx context.Context) {
	l.logger = klog.FromContext(ctx)
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(l.stopped, func() { cancel(context.Cause(l.stopped)) })
	l.running.Add(1)
	go func() {
		defer l.running.Done()
		defer l.workers.Close()
		defer utilruntime.HandleCrash()
		for l.dispatchNextWorkItem(ctx) {
		}
	}()
}

// Stop stops taking work, cancels the context of the syncs in flight
// (with cause ErrStopped) and waits for them to return, at most
// Options.StopGracePeriod: it then logs the keys of those still running,
// abandons them and returns. Keys still queued are dropped, and the
// queue's gauges of work in progress (metrics.ForgetQueue) deleted. It is
// idempotent; a second call returns once the first has.
func (l *Loop[K]) Stop() {
	l.stopOnce.Do(func() {
		l.queue.ShutDown()
		l.stop(ErrStopped)
		done := make(chan struct{})
		go func() {
			l.running.Wait()
			// The dispatcher, stopped, starts no more workers.
			l.workers.Wait()
			close(done)
		}()
		timer := time.NewTimer(l.opts.StopGracePeriod)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			l.logger.Info("Syncs still in flight after the stop grace period; abandoning them",
				"controller", l.opts.Name, "grace", l.opts.StopGracePeriod, "keys", l.abandoned())
		}
		// The shut-down queue sets its gauges no more: their last value
		// would stay.
		metrics.ForgetQueue(l.opts.Name)
	})
}

// abandoned lists the keys being synced, with how long each has run.
func (l *Loop[K]) abandoned() []string {
	l.inFlightMu.Lock()
	defer l.inFlightMu.Unlock()
	keys := make([]string, 0, len(l.inFlight))
	for key, since := range l.inFlight {
		keys = append(keys, fmt.Sprint(key)+" (for "+time.Since(since).Round(time.Millisecond).String()+")")
	}
	slices.Sort(keys)
	return keys
}

// dispatchNextWorkItem waits for a free slot and a key, then for a turn to
// run (after every sync resuming from a wait), and hands the key to a
// worker. It returns false once the queue is shut down.
func (l *Loop[K]) dispatchNextWorkItem(ctx context.Context) bool {
	l.slots.acquire()
	key, quit := l.queue.Get()
	if quit {
		l.slots.release()
		return false
	}
	l.active.acquire(false)
	l.workers.Go(func() { l.work(ctx, key) })
	return true
}

// work syncs key on a worker, then gives back its turn and its slot.
func (l *Loop[K]) work(ctx context.Context, key K) {
	defer utilruntime.HandleCrash()
	l.processNextWorkItem(ctx, key)
	l.active.release()
	l.slots.release()
}

// processNextWorkItem syncs key, taken from the queue, and queues it again
// as the result asks.
func (l *Loop[K]) processNextWorkItem(ctx context.Context, key K) {
	defer l.queue.Done(key)
	if ctx.Err() != nil {
		// Stopped: a key still queued is dropped.
		return
	}
	start := time.Now()
	s := l.takeSync(ctx, key, start)
	if s == nil {
		return
	}
	requeueAfter, took, err := l.runSync(ctx, s, start)
	l.handleResult(ctx, s, requeueAfter, took, err)
}

// takeSync returns the sync of key starting at start, with the triggers
// pending for it; nil when none is. A delayed trigger not yet due stays
// pending, and the key is queued again for it.
func (l *Loop[K]) takeSync(ctx context.Context, key K, start time.Time) *Sync[K] {
	s := &Sync[K]{Key: key, loop: l}
	var next time.Time
	s.triggers, s.dropped, next = l.pending.take(key, start)
	if !next.IsZero() {
		// A delayed trigger not yet due: the queue, which keeps one
		// delayed add per key (the soonest), wakes the key for it.
		l.queue.AddAfter(key, next.Sub(start))
	}
	if len(s.triggers) == 0 {
		// Every add carries a trigger, so none here means that the
		// triggers this add stood for were taken by the sync that ran
		// after them (an add racing with the start of that sync), that
		// they were dropped with the object (Gone) or after a success (a
		// retry no longer needed), or that this is the queue's wake-up
		// for a delayed trigger merged into an identical one due sooner
		// (pending.add keeps the earliest), which a sync took already:
		// nothing to do.
		klog.FromContext(ctx).V(5).Info("No trigger pending; sync skipped", "key", key)
		return nil
	}
	return s
}

// runSync runs the sync function for s, started at start, with the key
// in flight meanwhile, and observes how long it took (took). The delayed
// triggers of an object the sync found gone are forgotten.
func (l *Loop[K]) runSync(ctx context.Context, s *Sync[K], start time.Time) (requeueAfter, took time.Duration, err error) {
	key := s.Key
	l.inFlightMu.Lock()
	l.inFlight[key] = start
	l.inFlightMu.Unlock()
	defer func() {
		l.inFlightMu.Lock()
		delete(l.inFlight, key)
		l.inFlightMu.Unlock()
	}()

	s.wait = waitState{gate: l.active, window: l.slots}
	requeueAfter, err = l.sync(ctx, s)
	took = time.Since(start)
	skipped := errors.Is(err, ErrSkipped)
	if !skipped {
		metrics.SyncDuration.WithLabelValues(l.opts.Name).Observe(took.Seconds())
	}
	if skipped || s.isGone() {
		l.pending.forgetDelayed(key, time.Now())
	}
	return requeueAfter, took, err
}

// handleResult counts and logs the end of s, which took took, and queues
// its key again as its result asks: after requeueAfter when it succeeded,
// with its retry when it waits or failed; not when Stop cancelled it, nor
// when it was skipped (ErrSkipped).
func (l *Loop[K]) handleResult(ctx context.Context, s *Sync[K], requeueAfter, took time.Duration, err error) {
	logger := klog.FromContext(ctx)
	key := s.Key
	switch {
	case errors.Is(err, ErrSkipped):
		// Not this process's key now: dropped, uncounted, its failures
		// forgotten (runSync dropped its delayed triggers).
		l.queue.Forget(key)
		l.pending.forgetRetries(key)
		logger.V(4).Info("Sync skipped", "key", key, "triggers", s.triggers, "err", err)
	case err != nil && ctx.Err() != nil:
		// Cancelled by Stop: not a failure of the object, and not retried.
		logger.V(2).Info("Sync cancelled", "key", key, "triggers", s.triggers, "cause", context.Cause(ctx), "err", err)
	case err == nil:
		l.succeeded(ctx, s, requeueAfter, took)
	case errors.Is(err, ErrWaiting):
		delay, attempt := s.requeue()
		if logger.V(4).Enabled() {
			logger.V(4).Info("Waiting; retrying", "key", key, "triggers", s.triggers, "duration", took, "after", delay, "attempt", attempt)
		}
	default:
		l.failed(ctx, s, took, err)
	}
}

// firstCause is the cause of s's first trigger, which labels the sync's
// count, so that the counts over triggers add up to the syncs.
func (s *Sync[K]) firstCause() string { return string(s.triggers[0].Cause) }

// succeeded counts s, which took took and succeeded, forgets its key's
// retries, and queues the key again after requeueAfter when that is set.
func (l *Loop[K]) succeeded(ctx context.Context, s *Sync[K], requeueAfter, took time.Duration) {
	key := s.Key
	metrics.Syncs.WithLabelValues(l.opts.Name, "success", s.firstCause()).Inc()
	if logger := klog.FromContext(ctx); logger.V(4).Enabled() {
		logger.V(4).Info("Synced", "key", key, "triggers", s.triggers, "duration", took, "result", "success")
	}
	l.queue.Forget(key)
	// A retry still pending from an earlier failure is not needed
	// any more; the queue's wake-up for it finds no trigger.
	l.pending.forgetRetries(key)
	if requeueAfter > 0 && !s.isGone() {
		l.AddAfterFor(key, requeueAfter, trigger.Trigger{Cause: trigger.CauseResyncAfter})
	}
}

// failed counts s, which took took and failed with err, logs it, and
// queues its key again: when the hook asked (Retry-After), else with
// backoff.
func (l *Loop[K]) failed(ctx context.Context, s *Sync[K], took time.Duration, err error) {
	logger := klog.FromContext(ctx)
	key := s.Key
	metrics.Syncs.WithLabelValues(l.opts.Name, "error", s.firstCause()).Inc()
	if delay, ok := retryAfter(err); ok {
		logger.V(2).Info("Hook asked to retry later", "key", key, "triggers", s.triggers, "duration", took, "after", delay)
		l.AddAfterFor(key, delay, trigger.Trigger{Cause: trigger.CauseRetry})
		return
	}
	delay, attempt := s.requeue()
	if IsTransientConflict(err) {
		// The object changed under the sync; the cache catches up and the
		// retry resolves it.
		if logger.V(4).Enabled() {
			logger.V(4).Info("Conflict; retrying", "key", key, "triggers", s.triggers, "err", err, "after", delay, "attempt", attempt)
		}
	} else {
		logger.Error(err, "Sync failed; retrying", "key", key, "triggers", s.triggers, "duration", took, "after", delay, "attempt", attempt)
	}
}

// Sync is one sync of one key, as the loop hands it to its SyncFunc: the
// key, why it runs (Triggers), and the loop's part in it that the sync
// drives: the retry of a failure (Retry), the waits on hooks that give up
// its turn (WhileWaiting), its object found gone (Gone). A Sync not made
// by a Loop (nil, or &Sync{Key: key}) is a sync outside any loop (a
// one-off sync): it has no triggers and no retry, and its waits just run.
type Sync[K comparable] struct {
	// Key is the key synced.
	Key K

	loop *Loop[K]
	// triggers are why the key was queued since its last sync, first
	// first; dropped counts those beyond MaxTriggers.
	triggers []trigger.Trigger
	dropped  int
	wait     waitState

	mu   sync.Mutex
	gone bool
	// The retry, decided at most once: by Retry during the sync, or after
	// a failed sync.
	decided bool
	delay   time.Duration
	attempt int
}

// inLoop reports whether a Loop made s.
func (s *Sync[K]) inLoop() bool { return s != nil && s.loop != nil }

// decide returns the delay before the key is retried, the rate limiter's
// (capped at Options.MaxRetryDelay), and how many times in a row the key
// has now failed (1 for its first failure). The limiter counts the
// failure once, however many times decide is called; the queue's Forget,
// on the next success, resets that count.
func (s *Sync[K]) decide() (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.decided {
		limiter := s.loop.opts.RateLimiter
		s.delay = limiter.When(s.Key)
		if limit := s.loop.opts.MaxRetryDelay; limit > 0 {
			s.delay = min(s.delay, limit)
		}
		s.attempt = limiter.NumRequeues(s.Key)
		s.decided = true
	}
	return s.delay, s.attempt
}

// requeue queues the key again after decide's delay (AddRateLimited with
// the delay known), for a retry, and returns the delay and attempt.
func (s *Sync[K]) requeue() (time.Duration, int) {
	delay, attempt := s.decide()
	s.loop.AddAfterFor(s.Key, delay, trigger.Trigger{Cause: trigger.CauseRetry})
	return delay, attempt
}

// RetryDelay returns how long after a failure with err the loop retries
// the key: the delay a hook asked for with 429 Retry-After, else the
// backoff's next delay, the one the loop's log line of the failure then
// gives too. It counts a failure of the key, so call it only for a sync
// about to return err. ok is false outside a Loop's sync.
func (s *Sync[K]) RetryDelay(err error) (delay time.Duration, ok bool) {
	delay, _, ok = s.Retry(err)
	return delay, ok
}

// Retry is RetryDelay with the attempt: how many syncs of the key in a row
// have now failed or waited, this one included (1 for the first). The
// backoff does not count a retry a hook asked for with 429 Retry-After:
// its attempt is one more than the failures counted before it. Like
// RetryDelay, it counts a failure of the key (once per sync, however often
// either is called), so call it only for a sync about to return err.
func (s *Sync[K]) Retry(err error) (delay time.Duration, attempt int, ok bool) {
	if !s.inLoop() {
		return 0, 0, false
	}
	if delay, ok := retryAfter(err); ok {
		return delay, s.loop.opts.RateLimiter.NumRequeues(s.Key) + 1, true
	}
	delay, attempt = s.decide()
	return delay, attempt, true
}

// ErrSkipped marks a sync that did nothing, or stopped doing anything,
// because its key is not this process's to sync now (a replica that does
// not, or no longer, hold the key's shard: engine.Gate). The key is
// dropped: it is not retried, nor queued again for the sync's
// requeueAfter; the triggers queued with a delay for it (retries, resyncs)
// are dropped and its failure count forgotten; the sync is neither
// counted (metactl_syncs_total) nor timed. Whoever queues the key again
// (when the process takes the shard back) starts afresh.
var ErrSkipped = errors.New("skipped: not this process's to sync now")

// ErrWaiting marks a sync that waits for something, such as a resource not
// yet served or a hook that has not settled: it is retried with backoff
// without being logged or counted as an error each time (whoever returns it
// reports it).
var ErrWaiting = errors.New("waiting")

// A DelayedRetry is an error that asks to be retried after a delay of its
// own, instead of the backoff: a hook's HTTP 429 with Retry-After. The
// loop finds it with errors.As anywhere in an error's chain.
type DelayedRetry interface {
	error
	// RetryAfterDelay returns the delay asked for, and false when the
	// error asks for none.
	RetryAfterDelay() (time.Duration, bool)
}

// retryAfter returns the delay the first DelayedRetry in err's chain asks
// for.
func retryAfter(err error) (time.Duration, bool) {
	var d DelayedRetry
	if errors.As(err, &d) {
		return d.RetryAfterDelay()
	}
	return 0, false
}

// A Waiter marks the waits of a sync on something outside the process;
// *Sync is one.
type Waiter interface {
	WhileWaiting(wait func())
}

// WhileWaiting runs wait, which waits on something outside the process
// (a hook's answer): while wait runs, the sync gives up its turn to run
// (Options.Active), so another can start; when wait returns, the sync
// waits for a turn, ahead of any sync not yet started. Nested or
// concurrent calls in one sync give up one turn. Outside a Loop's sync,
// WhileWaiting just calls wait.
func (s *Sync[K]) WhileWaiting(wait func()) {
	if !s.inLoop() {
		wait()
		return
	}
	s.wait.enter()
	defer s.wait.exit()
	wait()
}

// waitState is one sync's waits: it holds its turn while none runs.
type waitState struct {
	gate   *gate
	window *window

	mu      sync.Mutex
	waiting int
	// since is when the sync last gave up its turn.
	since time.Time
}

func (s *waitState) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting++
	if s.waiting == 1 {
		s.since = time.Now()
		s.gate.release()
	}
}

func (s *waitState) exit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting--
	if s.waiting == 0 {
		resumed := time.Now()
		s.gate.acquire(true)
		s.window.resumed(time.Since(resumed), resumed.Sub(s.since))
	}
}

// window bounds the syncs in flight by a limit that adapts between min
// (Options.Active) and max (Options.Workers), judged each time a sync
// resumes from a wait: when it waited on its hook longer than it then
// waited for a turn, the hook's latency is what holds syncs up, and one
// more sync in flight can hide it, so the limit rises by one; otherwise
// turns are the bottleneck (the API server, the CPU), more syncs would
// only queue with their answers in memory, and the limit falls by a
// quarter. A slow hook so opens the window to max within a few of its
// calls, while a fast hook keeps it near min.
type window struct {
	mu       sync.Mutex
	cond     sync.Cond
	min, max int
	limit    int
	inFlight int
}

func newWindow(min, max int) *window {
	w := &window{min: min, max: max, limit: min}
	w.cond.L = &w.mu
	return w
}

// acquire waits until fewer syncs than the limit are in flight, and counts
// one more.
func (w *window) acquire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.inFlight >= w.limit {
		w.cond.Wait()
	}
	w.inFlight++
}

// release counts a sync less in flight.
func (w *window) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight--
	w.cond.Signal()
}

// resumed adapts the limit to a sync that waited turnWait for its turn
// after a wait of hookWait.
func (w *window) resumed(turnWait, hookWait time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if turnWait >= hookWait {
		w.limit = max(w.min, w.limit-w.limit/4)
		return
	}
	if w.limit < w.max {
		w.limit++
		w.cond.Signal()
	}
}

// RefusedConflict is implemented by the error of a write refused for a
// conflict that a retry does not resolve: a server-side apply that does
// not force conflicts, refused for fields other field managers own
// (children.ApplyConflictError). It wraps the API server's 409, but it is
// a failure like any other, not a transient conflict.
type RefusedConflict interface {
	error
	RefusedConflict()
}

// IsTransientConflict reports whether err is a conflict that a retry
// resolves (the object changed under the sync): apierrors.IsConflict, and
// no error that err wraps is a RefusedConflict.
func IsTransientConflict(err error) bool {
	var refused RefusedConflict
	return apierrors.IsConflict(err) && !errors.As(err, &refused)
}
