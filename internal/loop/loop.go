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

	start := time.Now()
	requeueAfter, err := l.sync(ctx, key)
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
		delay, attempt := l.retryLater(key)
		logger.V(4).Info("Waiting; retrying", "key", key, "after", delay, "attempt", attempt)
		return true
	}
	metrics.Syncs.WithLabelValues(l.opts.Name, "error").Inc()
	if delay, ok := hooks.RetryAfter(err); ok {
		logger.V(2).Info("Hook asked to retry later", "key", key, "after", delay)
		l.queue.AddAfter(key, delay)
		return true
	}
	delay, attempt := l.retryLater(key)
	if apierrors.IsConflict(err) {
		// The object changed under the sync; the cache catches up and the
		// retry resolves it.
		logger.V(4).Info("Conflict; retrying", "key", key, "err", err, "after", delay, "attempt", attempt)
	} else {
		logger.Error(err, "Sync failed; retrying", "key", key, "after", delay, "attempt", attempt)
	}
	return true
}

// retryLater queues key again after the rate limiter's delay for it, capped
// at Options.MaxRetryDelay, and returns that delay and how many times in a
// row key has now failed (1 for its first failure). It is AddRateLimited
// with the delay known: the queue's Forget, on the next success, resets the
// same limiter's count.
func (l *Loop) retryLater(key string) (delay time.Duration, attempt int) {
	delay = l.opts.RateLimiter.When(key)
	if l.opts.MaxRetryDelay > 0 {
		delay = min(delay, l.opts.MaxRetryDelay)
	}
	l.queue.AddAfter(key, delay)
	return delay, l.opts.RateLimiter.NumRequeues(key)
}

// ErrWaiting marks a sync that waits for something, such as a resource not
// yet served or a hook that has not settled: it is retried with backoff
// without being logged or counted as an error each time (whoever returns it
// reports it).
var ErrWaiting = errors.New("waiting")
