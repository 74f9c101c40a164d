package loop

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/metrics"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// SyncFunc syncs the object named by key. A positive requeueAfter asks for
// another sync after that delay.
type SyncFunc func(ctx context.Context, key string) (requeueAfter time.Duration, err error)

// Options configure a Loop.
type Options struct {
	// Name labels the queue's metrics and the sync metrics (the
	// controller's name).
	Name string
	// Workers is the number of keys synced at once; default 32.
	Workers int
	// RateLimiter spaces the retries of failing keys; default
	// NewRateLimiter(MaxRetryDelay).
	RateLimiter workqueue.TypedRateLimiter[string]
	// MaxRetryDelay, when positive, caps the delay before a failing key is
	// retried, whatever RateLimiter says. It does not shorten the delay a
	// hook asks for with 429 Retry-After.
	MaxRetryDelay time.Duration
}

// MaxRetryDelay is the default cap of the backoff of a failing key: a hook
// that recovers is called again within this long.
const MaxRetryDelay = 2 * time.Minute

// DefaultRateLimiter is NewRateLimiter(MaxRetryDelay).
func DefaultRateLimiter() workqueue.TypedRateLimiter[string] {
	return NewRateLimiter(MaxRetryDelay)
}

// NewRateLimiter returns the retry spacing of failing keys: exponential per
// key from 250ms (250ms, 500ms, 1s, ...), capped at maxDelay (MaxRetryDelay
// when not positive), and at most 50 retries a second overall with bursts
// of 300. Each controller needs its own: it counts failures per key.
func NewRateLimiter(maxDelay time.Duration) workqueue.TypedRateLimiter[string] {
	if maxDelay <= 0 {
		maxDelay = MaxRetryDelay
	}
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](min(250*time.Millisecond, maxDelay), maxDelay),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(50, 300)},
	)
}

// Loop is a work queue and its workers.
type Loop struct {
	opts    Options
	sync    SyncFunc
	queue   workqueue.TypedRateLimitingInterface[string]
	workers sync.WaitGroup
}

// New returns a Loop that calls sync for each key; nothing runs until Start.
// Keys may be added before Start.
func New(opts Options, sync SyncFunc) *Loop {
	if opts.Workers <= 0 {
		opts.Workers = 32
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = NewRateLimiter(opts.MaxRetryDelay)
	}
	return &Loop{
		opts: opts,
		sync: sync,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(opts.RateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: opts.Name}),
	}
}

// Add queues key now. Adding a key already queued does nothing.
func (l *Loop) Add(key string) { l.queue.Add(key) }

// AddAfter queues key after delay.
func (l *Loop) AddAfter(key string, delay time.Duration) { l.queue.AddAfter(key, delay) }

// Start starts the workers. They run with ctx's values but not its
// cancellation: Stop ends them, after their in-flight syncs.
func (l *Loop) Start(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for range l.opts.Workers {
		l.workers.Add(1)
		go func() {
			defer l.workers.Done()
			defer utilruntime.HandleCrash()
			for l.processNextWorkItem(ctx) {
			}
		}()
	}
}

// Stop stops taking work, waits for in-flight syncs, and drops the keys
// still queued. It is idempotent.
func (l *Loop) Stop() {
	l.queue.ShutDown()
	l.workers.Wait()
}

// ShuttingDown reports whether Stop was called.
func (l *Loop) ShuttingDown() bool { return l.queue.ShuttingDown() }

func (l *Loop) processNextWorkItem(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)

	retry := &retryState{loop: l, key: key}
	start := time.Now()
	requeueAfter, err := l.sync(context.WithValue(ctx, retryStateKey{}, retry), key)
	metrics.SyncDuration.WithLabelValues(l.opts.Name).Observe(time.Since(start).Seconds())
	logger := klog.FromContext(ctx)
	switch {
	case err == nil:
		metrics.Syncs.WithLabelValues(l.opts.Name, "success").Inc()
		l.queue.Forget(key)
		if requeueAfter > 0 {
			l.queue.AddAfter(key, requeueAfter)
		}
		return true
	case errors.Is(err, ErrWaiting):
		delay, attempt := retry.requeue()
		logger.V(4).Info("Waiting; retrying", "key", key, "after", delay, "attempt", attempt)
		return true
	}
	metrics.Syncs.WithLabelValues(l.opts.Name, "error").Inc()
	if delay, ok := hooks.RetryAfter(err); ok {
		logger.V(2).Info("Hook asked to retry later", "key", key, "after", delay)
		l.queue.AddAfter(key, delay)
		return true
	}
	delay, attempt := retry.requeue()
	if apierrors.IsConflict(err) {
		// The object changed under the sync; the cache catches up and the
		// retry resolves it.
		logger.V(4).Info("Conflict; retrying", "key", key, "err", err, "after", delay, "attempt", attempt)
	} else {
		logger.Error(err, "Sync failed; retrying", "key", key, "after", delay, "attempt", attempt)
	}
	return true
}

// retryState is the retry of one sync of key, decided at most once: by
// RetryDelay during the sync, or after a failed sync.
type retryState struct {
	loop *Loop
	key  string

	mu      sync.Mutex
	decided bool
	delay   time.Duration
	attempt int
}

type retryStateKey struct{}

// decide returns the delay before key is retried, the rate limiter's
// (capped at Options.MaxRetryDelay), and how many times in a row key has
// now failed (1 for its first failure). The limiter counts the failure
// once, however many times decide is called; the queue's Forget, on the
// next success, resets that count.
func (r *retryState) decide() (time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.decided {
		limiter := r.loop.opts.RateLimiter
		r.delay = limiter.When(r.key)
		if limit := r.loop.opts.MaxRetryDelay; limit > 0 {
			r.delay = min(r.delay, limit)
		}
		r.attempt = limiter.NumRequeues(r.key)
		r.decided = true
	}
	return r.delay, r.attempt
}

// requeue queues key again after decide's delay (AddRateLimited with the
// delay known) and returns the delay and attempt.
func (r *retryState) requeue() (time.Duration, int) {
	delay, attempt := r.decide()
	r.loop.queue.AddAfter(r.key, delay)
	return delay, attempt
}

// RetryDelay returns, from within a SyncFunc called by a Loop (ctx is the
// one it got), how long after a failure with err the loop retries the key:
// the delay a hook asked for with 429 Retry-After, else the backoff's next
// delay, the one the loop's log line of the failure then gives too. It
// counts a failure of the key, so call it only for a sync about to return
// err. ok is false outside a Loop's sync.
func RetryDelay(ctx context.Context, err error) (delay time.Duration, ok bool) {
	r, ok := ctx.Value(retryStateKey{}).(*retryState)
	if !ok {
		return 0, false
	}
	if delay, ok := hooks.RetryAfter(err); ok {
		return delay, true
	}
	delay, _ = r.decide()
	return delay, true
}

// ErrWaiting marks a sync that waits for something, such as a resource not
// yet served or a hook that has not settled: it is retried with backoff
// without being logged or counted as an error each time (whoever returns it
// reports it).
var ErrWaiting = errors.New("waiting")
