package shard

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

const (
	// MemberLabel labels every member Lease of an install, its value the
	// install's Name: members are listed by it.
	MemberLabel = "metactl.io/shard-member"
	// BucketLabel labels every bucket Lease of an install, its value the
	// install's Name: each round lists them, so that each replica times
	// every bucket Lease from when it changed, not from when the bucket
	// came to be assigned to it.
	BucketLabel = "metactl.io/shard-bucket"
	// BucketsAnnotation on a member Lease announces the member's number of
	// buckets; members announcing another number are ignored.
	BucketsAnnotation = "metactl.io/shard-buckets"
)

// MemberLeaseName returns the name of identity's member Lease in the
// install name: name-member- and 8 hexadecimal digits of the 32-bit
// FNV-1a hash of identity, which may hold characters a Lease name may not.
func MemberLeaseName(name, identity string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(identity)) // a hash.Hash never fails to write
	return fmt.Sprintf("%s-member-%08x", name, h.Sum32())
}

// BucketLeaseName returns the name of bucket b's Lease in the install
// name: name-bucket-<b>, or name-bucket-cluster for the cluster bucket
// (b < 0).
func BucketLeaseName(name string, b Bucket) string {
	return name + "-bucket-" + bucketKey(b)
}

// observer remembers, by this replica's clock, when each Lease was last
// seen to change (its resourceVersion), as client-go's leader election
// does: a Lease is expired when it has not changed for its duration since
// then, however the clocks of its writers and of this replica differ.
type observer struct {
	clk clock.PassiveClock
	mu  sync.Mutex
	// seen holds, by Lease name, the resourceVersion last seen and when it
	// was first seen.
	seen map[string]observation
}

type observation struct {
	resourceVersion string
	at              time.Time
}

func newObserver(clk clock.PassiveClock) *observer {
	return &observer{clk: clk, seen: map[string]observation{}}
}

// expired records l as seen now, and reports whether it has no holder or
// has not changed within its lease duration since this replica first saw
// its current version: the longer of def and the duration the Lease
// states.
func (o *observer) expired(l *coordinationv1.Lease, def time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.clk.Now()
	obs, ok := o.seen[l.Name]
	if !ok || obs.resourceVersion != l.ResourceVersion {
		obs = observation{resourceVersion: l.ResourceVersion, at: now}
		o.seen[l.Name] = obs
	}
	if holder(l) == "" {
		return true
	}
	return now.Sub(obs.at) >= o.duration(l, def)
}

// duration returns the lease duration of l: the longer of def and the
// duration l states.
func (o *observer) duration(l *coordinationv1.Lease, def time.Duration) time.Duration {
	return max(def, time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0))*time.Second)
}

// unchangedFor returns how long l has been seen at its current version
// (0 if o has not seen it).
func (o *observer) unchangedFor(l *coordinationv1.Lease) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs, ok := o.seen[l.Name]
	if !ok || obs.resourceVersion != l.ResourceVersion {
		return 0
	}
	return o.clk.Now().Sub(obs.at)
}

// retain forgets the Leases whose names are not in names: those deleted
// since, whose versions need not be kept.
func (o *observer) retain(names map[string]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for name := range o.seen {
		if !names[name] {
			delete(o.seen, name)
		}
	}
}

// holder returns l's holder, "" for none.
func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leases writes the Leases of one replica in one namespace. Every update
// carries the resourceVersion the replica read, so that of two replicas
// writing the same version one fails with a Conflict.
type leases struct {
	client coordinationv1client.LeaseInterface
	// name is the install's, the value of BucketLabel.
	name     string
	identity string
	duration time.Duration
	clk      clock.PassiveClock
}

// take makes this replica the holder of the Lease named name: it creates
// it when cur is nil (absent), else updates cur, which the caller has
// found free. A Conflict or AlreadyExists error means another replica
// wrote first.
func (l *leases) take(ctx context.Context, name string, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	now := metav1.NewMicroTime(l.clk.Now())
	if cur == nil {
		return l.client.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{BucketLabel: l.name}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(l.identity),
				LeaseDurationSeconds: ptr.To(l.seconds()),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
	}
	next := cur.DeepCopy()
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[BucketLabel] = l.name
	next.Spec.HolderIdentity = ptr.To(l.identity)
	next.Spec.LeaseDurationSeconds = ptr.To(l.seconds())
	next.Spec.AcquireTime = &now
	next.Spec.RenewTime = &now
	next.Spec.LeaseTransitions = ptr.To(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
	return l.client.Update(ctx, next, metav1.UpdateOptions{})
}

// renew writes a new renewTime to cur, which this replica holds.
func (l *leases) renew(ctx context.Context, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	next := cur.DeepCopy()
	now := metav1.NewMicroTime(l.clk.Now())
	next.Spec.RenewTime = &now
	next.Spec.LeaseDurationSeconds = ptr.To(l.seconds())
	return l.client.Update(ctx, next, metav1.UpdateOptions{})
}

// release empties cur's holder, so that another replica may take it at
// once.
func (l *leases) release(ctx context.Context, cur *coordinationv1.Lease) error {
	next := cur.DeepCopy()
	next.Spec.HolderIdentity = ptr.To("")
	_, err := l.client.Update(ctx, next, metav1.UpdateOptions{})
	return err
}

// seconds returns the lease duration in whole seconds, at least 1.
func (l *leases) seconds() int32 {
	return max(int32(l.duration/time.Second), 1)
}
