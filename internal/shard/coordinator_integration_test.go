//go:build integration

package shard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/testenv"
)

const (
	testBuckets       = 16
	testLeaseDuration = 3 * time.Second
)

// recorder watches several Coordinators of one install at once and
// records every instant at which two of them work on one bucket: both
// active in their gates (onTransition is called just before a bucket
// becomes active and just after it stops), or one active while a sync of
// the other's is still in flight.
type recorder struct {
	t  *testing.T
	mu sync.Mutex
	// active holds, per bucket, the coordinators where it is active.
	active map[Bucket]map[string]bool
	// syncs holds, per bucket, the coordinators with a sync in flight.
	syncs map[Bucket]map[string]int
	// held holds each coordinator's set as last given to Hold.
	held map[string]Set
	// checkHeld makes two Holds of one bucket at once a violation too.
	checkHeld  bool
	violations []string
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, active: map[Bucket]map[string]bool{}, syncs: map[Bucket]map[string]int{}, held: map[string]Set{}}
}

func (r *recorder) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *recorder) transition(id string) func(Bucket, bool) {
	return func(b Bucket, active bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.active[b] == nil {
			r.active[b] = map[string]bool{}
		}
		if !active {
			delete(r.active[b], id)
			return
		}
		for other := range r.active[b] {
			r.violate("bucket %s activated in %s while active in %s", bucketKey(b), id, other)
		}
		for other, n := range r.syncs[b] {
			if other != id && n > 0 {
				r.violate("bucket %s activated in %s while %d syncs of %s are in flight", bucketKey(b), id, n, other)
			}
		}
		r.active[b][id] = true
	}
}

func (r *recorder) hold(id string) func(context.Context, Set) error {
	return func(_ context.Context, s Set) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.checkHeld {
			for other, os := range r.held {
				if other == id {
					continue
				}
				for _, b := range s.Members() {
					if os.Has(b) && !r.held[id].Has(b) {
						r.violate("bucket %d added to the caches of %s while in those of %s", b, id, other)
					}
				}
			}
		}
		r.held[id] = s
		return nil
	}
}

// begin starts a sync in c's gate for namespace, recording it.
func (r *recorder) begin(id string, c *Coordinator, namespace string) (context.Context, func()) {
	b := Of(namespace, testBuckets)
	r.mu.Lock()
	defer r.mu.Unlock() // Begin under r.mu: no transition can slip between
	ctx, done, ok := c.Gate().Begin(context.Background(), namespace)
	if !ok {
		r.t.Fatalf("%s refused a sync of bucket %d", id, b)
	}
	if r.syncs[b] == nil {
		r.syncs[b] = map[string]int{}
	}
	r.syncs[b][id]++
	return ctx, func() {
		r.mu.Lock()
		r.syncs[b][id]--
		r.mu.Unlock()
		done()
	}
}

func (r *recorder) check() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		r.t.Error(v)
	}
}

// member is one Coordinator under test, run until stop.
type member struct {
	id      string
	c       *Coordinator
	stop    context.CancelFunc
	stopped chan struct{}
	// dead, once set, fails every request of the member's client.
	dead atomic.Bool
}

// install is the Coordinators of one install under test.
type install struct {
	t         *testing.T
	r         *recorder
	namespace string
	name      string
	grace     time.Duration
	members   []*member
}

// newInstall returns an install named name whose Leases are in a fresh
// namespace, its members stopped when t ends.
func newInstall(t *testing.T, r *recorder, name string, grace time.Duration) *install {
	in := &install{t: t, r: r, namespace: env.CreateNamespace(t), name: name, grace: grace}
	t.Cleanup(func() {
		for _, m := range in.members {
			m.stop()
		}
		for _, m := range in.members {
			select {
			case <-m.stopped:
			case <-time.After(30 * time.Second):
				t.Errorf("%s: Run did not return 30s after its context ended", m.id)
			}
		}
	})
	return in
}

// start starts a Coordinator per identity, with short durations,
// recording into the install's recorder, and returns them.
func (in *install) start(ids ...string) []*member {
	t := in.t
	t.Helper()
	var ms []*member
	for _, id := range ids {
		m := &member{id: id, stopped: make(chan struct{})}
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(req *http.Request) (*http.Response, error) {
				if m.dead.Load() {
					return nil, errors.New("the network is gone")
				}
				return rt.RoundTrip(req)
			})
		})
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m.c, err = New(Options{
			Leases: client.CoordinationV1(), Namespace: in.namespace, Name: in.name, Identity: id, Buckets: testBuckets,
			LeaseDuration: testLeaseDuration, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
			StopGracePeriod: in.grace, CancelWait: time.Second,
			Hold:         in.r.hold(id),
			onTransition: in.r.transition(id),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m.stop = cancel
		go func() {
			defer close(m.stopped)
			if err := m.c.Run(ctx); err != nil {
				t.Errorf("%s: Run: %v", id, err)
			}
		}()
		ms = append(ms, m)
		in.members = append(in.members, m)
	}
	return ms
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// converged reports whether the members own exactly what Assign gives
// each among them: every bucket, and the cluster bucket, active in
// exactly one.
func converged(ms []*member) (bool, error) {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.id)
	}
	for _, m := range ms {
		want, wantCluster := Assign(testBuckets, ids, m.id)
		if got := m.c.Owned(); !got.Equal(want) || m.c.OwnsCluster() != wantCluster {
			return false, fmt.Errorf("%s owns %v (cluster %v), assigned %v (cluster %v)", m.id, got, m.c.OwnsCluster(), want, wantCluster)
		}
	}
	return true, nil
}

// sample checks, until ctx ends, that no bucket is seen active in two
// members: b in a's Owned, then in b's, then in a's again.
func sample(ctx context.Context, t *testing.T, members func() []*member) {
	reported := map[string]bool{}
	for ctx.Err() == nil {
		ms := members()
		for _, a := range ms {
			for _, o := range ms {
				if a == o {
					continue
				}
				first := a.c.Owned()
				other := o.c.Owned()
				again := a.c.Owned()
				for _, b := range first.Members() {
					if key := fmt.Sprint(b, a.id, o.id); other.Has(b) && again.Has(b) && !reported[key] {
						reported[key] = true
						t.Errorf("bucket %d active in %s and %s at once (by Owned)", b, a.id, o.id)
					}
				}
			}
		}
		time.Sleep(5 * time.Millisecond) // a sampling rate, not a synchronisation
	}
}

// namespaceIn returns a namespace whose bucket is one of s.
func namespaceIn(t *testing.T, s Set) string {
	t.Helper()
	for i := range 100000 {
		ns := fmt.Sprintf("team-%x", Hash(fmt.Sprint(i)))
		if s.Contains(ns) {
			return ns
		}
	}
	t.Fatalf("no namespace in %v", s)
	return ""
}

// TestCoordinatorsShareAndHandOver starts one Coordinator, then two
// more: they converge to the assignment; then one stops: it gives up its
// buckets only once its sync in flight is done, and the others take them
// at once (before the lease duration). Never is a bucket active in two
// replicas, nor active in one while another still syncs it, nor added to
// one replica's caches while in another's.
func TestCoordinatorsShareAndHandOver(t *testing.T) {
	r := newRecorder(t)
	r.checkHeld = true
	in := newInstall(t, r, "handover", 30*time.Second)
	var mu sync.Mutex
	var joined []*member
	members := func() []*member {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(joined)
	}
	add := func(ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		joined = append(joined, in.start(ids...)...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var sampling sync.WaitGroup
	sampling.Go(func() { sample(ctx, t, members) })
	defer func() { cancel(); sampling.Wait(); r.check() }()

	add("replica-a_1")
	testenv.Eventually(t, 30*time.Second, "a lone replica to own every bucket", func(context.Context) (bool, error) {
		return converged(members())
	})
	add("replica-b_2", "replica-c_3")
	testenv.Eventually(t, 30*time.Second, "the three to own their assigned buckets", func(context.Context) (bool, error) {
		return converged(members())
	})
	ms := members()

	// A sync in flight on the leaving replica holds its buckets back.
	leaving := ms[0]
	syncCtx, done := r.begin(leaving.id, leaving.c, namespaceIn(t, leaving.c.Owned()))
	leaving.stop()
	testenv.Eventually(t, 10*time.Second, "the leaving replica to deactivate its buckets", func(context.Context) (bool, error) {
		return leaving.c.Owned().Len() == 0 && !leaving.c.OwnsCluster(), nil
	})
	// Two rounds of the others with the sync still in flight: the
	// recorder fails the test if one of them takes a bucket meanwhile.
	window := time.After(1500 * time.Millisecond)
	<-window
	if syncCtx.Err() != nil {
		t.Fatal("the sync was cancelled before the stop grace period")
	}
	done()
	released := time.Now()
	testenv.Eventually(t, 10*time.Second, "the leaving replica's Run to return", func(context.Context) (bool, error) {
		select {
		case <-leaving.stopped:
			return true, nil
		default:
			return false, nil
		}
	})
	testenv.Eventually(t, 10*time.Second, "the two others to own all buckets", func(context.Context) (bool, error) {
		return converged(ms[1:])
	})
	if took := time.Since(released); took >= testLeaseDuration {
		t.Errorf("the others took the released buckets %v after the sync ended: no faster than waiting for expiry", took)
	}
	_, err := env.Kube.CoordinationV1().Leases(ms[1].c.opts.Namespace).Get(context.Background(), MemberLeaseName("handover", leaving.id), metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the leaving replica's member Lease: %v, want NotFound", err)
	}
}

// TestKilledCoordinatorsBucketsMove cuts one of three Coordinators off
// the API server: it deactivates its buckets at the renew deadline, and
// the others take them only after the lease duration, after it stopped.
func TestKilledCoordinatorsBucketsMove(t *testing.T) {
	r := newRecorder(t)
	ms := newInstall(t, r, "killed", time.Second).start("replica-a_1", "replica-b_2", "replica-c_3")
	ctx, cancel := context.WithCancel(context.Background())
	var sampling sync.WaitGroup
	sampling.Go(func() { sample(ctx, t, func() []*member { return ms }) })
	defer func() { cancel(); sampling.Wait(); r.check() }()

	testenv.Eventually(t, 30*time.Second, "the three to own their assigned buckets", func(context.Context) (bool, error) {
		return converged(ms)
	})
	killed := ms[2]
	had := killed.c.Owned()
	syncCtx, done := r.begin(killed.id, killed.c, namespaceIn(t, had))
	defer done()
	cut := time.Now()
	killed.dead.Store(true)
	testenv.Eventually(t, 10*time.Second, "the cut replica to deactivate its buckets", func(context.Context) (bool, error) {
		return killed.c.Owned().Len() == 0 && !killed.c.OwnsCluster() && syncCtx.Err() != nil, nil
	})
	if took := time.Since(cut); took >= testLeaseDuration {
		t.Errorf("the cut replica stopped %v after losing the API server, not before the lease duration", took)
	}
	done() // its sync ends, cancelled
	testenv.Eventually(t, 20*time.Second, "the two others to own all buckets", func(context.Context) (bool, error) {
		return converged(ms[:2])
	})
	took := time.Since(cut)
	t.Logf("the others took the cut replica's buckets %v after it was cut", took)
	if took < testLeaseDuration-time.Second {
		t.Errorf("the others took the cut replica's buckets %v after it was cut: before its Leases could expire", took)
	}
	// The bucket Leases expire with the member's: the others time them
	// from their last change, not from when they were assigned the
	// buckets, which would add a lease duration.
	if took >= 2*testLeaseDuration {
		t.Errorf("the others took the cut replica's buckets %v after it was cut: not within one lease duration of its Leases' expiry", took)
	}
	for _, b := range had.Members() {
		if !slices.ContainsFunc(ms[:2], func(m *member) bool { return m.c.Owned().Has(b) }) {
			t.Errorf("bucket %d of the cut replica is not taken", b)
		}
	}
}
