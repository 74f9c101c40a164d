package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/metactl/metactl/internal/metrics"
)

// cluster is the cluster bucket among a Coordinator's buckets: the slot
// of the WholeGate, beside the hash buckets 0 … Buckets-1.
const cluster Bucket = -1

// LeaseClient is the API a Coordinator writes its Leases with: the
// coordination.k8s.io/v1 client (kubernetes.Interface's CoordinationV1()).
type LeaseClient = coordinationv1client.LeasesGetter

// Options configure a Coordinator. Durations left zero take their
// defaults.
type Options struct {
	// Leases is the client of the Leases; required.
	Leases LeaseClient
	// Namespace holds every Lease; required.
	Namespace string
	// Name prefixes the Lease names: Name-member-<8 hexadecimal digits of
	// the FNV-1a hash of Identity>, Name-bucket-<i>, Name-bucket-cluster;
	// required, and a valid Lease name prefix.
	Name string
	// Identity is this replica's, unique among the replicas (such as
	// hostname_uuid); required. It is the holder of the Leases it holds,
	// and never part of a Lease name.
	Identity string
	// Buckets is the number of buckets of the install, the same on every
	// replica, in [1, MaxBuckets].
	Buckets int

	// LeaseDuration is how long a Lease not renewed, as timed by each
	// replica's own clock from when it saw the Lease change, keeps others
	// from taking it, and a member counts as live. Default 15s; at least
	// 1s (Leases state it in whole seconds).
	LeaseDuration time.Duration
	// RenewDeadline is how long a bucket this replica could not renew
	// stays active: past it, its syncs are cancelled at once. Default
	// 10s; less than LeaseDuration, so that a replica stops before another
	// may take its bucket.
	RenewDeadline time.Duration
	// RetryPeriod is how often Leases are renewed and the members read
	// again. Default 2s; less than RenewDeadline and than LeaseDuration -
	// RenewDeadline.
	RetryPeriod time.Duration
	// StopGracePeriod is how long a bucket being given up waits for its
	// syncs in flight before cancelling their contexts. Default 10s.
	StopGracePeriod time.Duration
	// CancelWait is how long a bucket being given up waits for its syncs
	// once their contexts are cancelled; past it the handover goes on
	// without them, with an error in the log. Default 5s.
	CancelWait time.Duration

	// Hold makes the replica's caches hold exactly the objects of set,
	// and returns once they have synced, or with an error once ctx ends.
	// It is called before gained buckets are activated (with the larger
	// set) and after lost or given up ones are drained (with the smaller
	// set); before its first call the caches are taken to hold nothing.
	// Nil: nothing to do.
	Hold func(ctx context.Context, set Set) error
	// Activated is told the buckets that just became active, whose cached
	// parents must be queued, and whether the cluster bucket just did
	// (the controllers that run whole must start). Nil: nothing.
	Activated func(gained Set, cluster bool)
	// ReleaseCluster is called each time the cluster bucket stops being
	// active after Activated reported it: given up (after its gate stopped
	// admitting and its syncs drained, before its Lease is released) or
	// lost (its syncs cancelled). It returns once the controllers that run
	// whole have stopped. Nil: nothing.
	ReleaseCluster func(ctx context.Context)

	// Clock is the clock of every timer and timestamp; default the real
	// one. For tests.
	Clock clock.WithTicker

	// onTransition, for tests, is called with the Coordinator's lock held
	// just before a bucket (cluster for the cluster bucket) becomes active
	// and just after it stops being active.
	onTransition func(b Bucket, active bool)
}

// Coordinator shares the buckets of an install among the replicas that
// run one each, through Leases (see the package documentation). Its
// methods are safe for concurrent use.
type Coordinator struct {
	opts   Options
	leases *leases
	// seen and seenMembers time the bucket and the member Leases.
	seen        *observer
	seenMembers *observer
	gate        *Gate
	whole       *Gate

	// member is this replica's member Lease as last written; only the
	// renewing goroutine uses it while Run runs.
	member *coordinationv1.Lease

	mu sync.Mutex
	// held are the bucket Leases this replica holds: being taken, active,
	// or being given up.
	held map[Bucket]*heldLease
	// active are the buckets active in the gates.
	active map[Bucket]bool
	// lost are the activations of buckets lost since the main loop last
	// looked, to drain before the caches shrink.
	lost []lostBucket
	// wake tells the main loop that buckets were lost.
	wake chan struct{}
	// ignored are the member Leases reported for another number of
	// buckets, by name: holder/buckets as reported, so each is logged
	// once.
	ignored map[string]string
}

// heldLease is a bucket Lease this replica holds.
type heldLease struct {
	// write serialises the writes of the Lease.
	write sync.Mutex
	// The fields below are guarded by the Coordinator's mu.
	lease *coordinationv1.Lease
	// renewed is when the last successful write of the Lease was sent.
	renewed time.Time
	// gone is set once the Lease is released or lost: no more writes.
	gone bool
}

type lostBucket struct {
	b Bucket
	a *activation
}

// New checks opts and returns a Coordinator; it starts nothing.
func New(opts Options) (*Coordinator, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	c := &Coordinator{
		opts: opts,
		leases: &leases{
			client:   opts.Leases.Leases(opts.Namespace),
			name:     opts.Name,
			identity: opts.Identity,
			duration: opts.LeaseDuration,
			clk:      opts.Clock,
		},
		seen:        newObserver(opts.Clock),
		seenMembers: newObserver(opts.Clock),
		held:        map[Bucket]*heldLease{},
		active:      map[Bucket]bool{},
		wake:        make(chan struct{}, 1),
		ignored:     map[string]string{},
	}
	buckets := opts.Buckets
	c.gate = newGate(buckets, func(ns string) int { return int(Of(ns, buckets)) }, func(slot int) string { return bucketKey(Bucket(slot)) })
	c.whole = newGate(1, func(string) int { return 0 }, func(int) string { return bucketKey(cluster) })
	return c, nil
}

// complete fills in the defaults of o and checks it.
func (o *Options) complete() error {
	var errs []error
	if o.Leases == nil {
		errs = append(errs, errors.New("the option Leases is nil: give the client of the Leases"))
	}
	if o.Namespace == "" {
		errs = append(errs, errors.New("the option Namespace is empty: give the namespace of the Leases (the leader election's)"))
	}
	if o.Name == "" {
		errs = append(errs, errors.New("the option Name is empty: give the prefix of the Lease names (the leader election's Lease name)"))
	} else if msgs := validation.IsDNS1123Subdomain(BucketLeaseName(o.Name, cluster)); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("the option Name %q does not make valid Lease names (%s): use lower case letters, digits and '-'", o.Name, msgs[0]))
	}
	if o.Identity == "" {
		errs = append(errs, errors.New("the option Identity is empty: give this replica's unique identity"))
	}
	if o.Buckets < 1 || o.Buckets > MaxBuckets {
		errs = append(errs, fmt.Errorf("the option Buckets is %d: give the install's number of buckets, 1 to %d", o.Buckets, MaxBuckets))
	}
	defaultTo(&o.LeaseDuration, 15*time.Second)
	defaultTo(&o.RenewDeadline, 10*time.Second)
	defaultTo(&o.RetryPeriod, 2*time.Second)
	defaultTo(&o.StopGracePeriod, 10*time.Second)
	defaultTo(&o.CancelWait, 5*time.Second)
	if o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("LeaseDuration is %v: give at least 1s", o.LeaseDuration))
	}
	if o.RenewDeadline >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("RenewDeadline %v is not less than LeaseDuration %v: a replica must stop before others may take its buckets", o.RenewDeadline, o.LeaseDuration))
	}
	if o.RetryPeriod >= o.RenewDeadline || o.RetryPeriod >= o.LeaseDuration-o.RenewDeadline {
		errs = append(errs, fmt.Errorf("RetryPeriod %v is not less than RenewDeadline %v and than LeaseDuration - RenewDeadline %v: shorten it",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration-o.RenewDeadline))
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	return nil
}

func defaultTo(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Gate returns the gate of the namespaced controllers' parents: it admits
// a namespace while its bucket is active on this replica.
func (c *Coordinator) Gate() *Gate { return c.gate }

// WholeGate returns the gate of the controllers that run whole: it admits
// every namespace while the cluster bucket is active on this replica.
func (c *Coordinator) WholeGate() *Gate { return c.whole }

// Owned returns the hash buckets active on this replica now.
func (c *Coordinator) Owned() Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.activeSet()
}

// OwnsCluster reports whether the cluster bucket is active on this
// replica now.
func (c *Coordinator) OwnsCluster() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active[cluster]
}

// activeSet returns the active hash buckets; c.mu must be held.
func (c *Coordinator) activeSet() Set {
	s := Set{Buckets: c.opts.Buckets}
	for b := range Bucket(c.opts.Buckets) {
		if c.active[b] {
			s.members = append(s.members, b)
		}
	}
	return s
}

// gateOf returns the gate and slot of bucket b.
func (c *Coordinator) gateOf(b Bucket) (*Gate, int) {
	if b == cluster {
		return c.whole, 0
	}
	return c.gate, int(b)
}

// activate activates those of bs this replica still holds, and returns
// them.
func (c *Coordinator) activate(bs []Bucket) []Bucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	var done []Bucket
	for _, b := range bs {
		if h := c.held[b]; h == nil || h.gone || c.active[b] {
			continue
		}
		if c.opts.onTransition != nil {
			c.opts.onTransition(b, true)
		}
		g, slot := c.gateOf(b)
		g.activate(slot)
		c.active[b] = true
		metrics.ShardBucketOwned.WithLabelValues(bucketKey(b)).Set(1)
		done = append(done, b)
	}
	return done
}

// deactivate deactivates b and returns its ended activation (nil if b
// was not active); c.mu must be held.
func (c *Coordinator) deactivate(b Bucket) *activation {
	if !c.active[b] {
		return nil
	}
	g, slot := c.gateOf(b)
	a := g.deactivate(slot)
	delete(c.active, b)
	if c.opts.onTransition != nil {
		c.opts.onTransition(b, false)
	}
	metrics.ShardBucketOwned.WithLabelValues(bucketKey(b)).Set(0)
	return a
}

// split returns the hash buckets of bs as a Set, and whether bs holds
// the cluster bucket.
func (c *Coordinator) split(bs []Bucket) (Set, bool) {
	s := Set{Buckets: c.opts.Buckets}
	hasCluster := false
	for _, b := range bs {
		if b == cluster {
			hasCluster = true
		} else {
			s.members = append(s.members, b)
		}
	}
	s, _ = NewSet(c.opts.Buckets, s.members...) // sorted; every b is in range
	return s, hasCluster
}

// request returns a context for one API request: ctx, bounded by the
// renew deadline.
func (c *Coordinator) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.RenewDeadline)
}
