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
	// DefaultRateLimiter().
	RateLimiter workqueue.TypedRateLimiter[string]
}

// MaxRetryDelay caps the backoff of a failing key: a hook that recovers is
// called again within this long.
const MaxRetryDelay = 2 * time.Minute

// DefaultRateLimiter is the retry spacing of failing keys: exponential per
// key from 250ms (250ms, 500ms, 1s, ...), capped at MaxRetryDelay, and at
// most 50 retries a second overall with bursts of 300.
func DefaultRateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](250*time.Millisecond, MaxRetryDelay),
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
		opts.RateLimiter = DefaultRateLimiter()
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
		l.queue.AddRateLimited(key)
		return true
	}
	metrics.Syncs.WithLabelValues(l.opts.Name, "error").Inc()
	if delay, ok := hooks.RetryAfter(err); ok {
		logger.V(2).Info("Hook asked to retry later", "key", key, "after", delay)
		l.queue.AddAfter(key, delay)
		return true
	}
	if apierrors.IsConflict(err) {
		// The object changed under the sync; the cache catches up and the
		// retry resolves it.
		logger.V(4).Info("Conflict; retrying", "key", key, "err", err)
	} else {
		logger.Error(err, "Sync failed", "key", key)
	}
	l.queue.AddRateLimited(key)
	return true
}

// ErrWaiting marks a sync that waits for something, such as a resource not
// yet served or a hook that has not settled: it is retried with backoff
// without being logged or counted as an error each time (whoever returns it
// reports it).
var ErrWaiting = errors.New("waiting")
