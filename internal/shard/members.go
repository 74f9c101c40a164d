package shard

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/metrics"
)

// renewMember creates or renews this replica's member Lease, with its
// label and its announcement of the number of buckets.
func (c *Coordinator) renewMember(ctx context.Context) error {
	ctx, cancel := c.request(ctx)
	defer cancel()
	name := MemberLeaseName(c.opts.Name, c.opts.Identity)
	cur := c.member
	if cur == nil {
		got, err := c.leases.client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading member Lease %s: %w", name, err)
		default:
			cur = got
			if h := holder(got); h != "" && h != c.opts.Identity {
				klog.FromContext(ctx).Error(nil, "Member Lease held by another identity of the same hash; taking it over", "lease", name, "holder", h)
			}
		}
	}
	now := metav1.NewMicroTime(c.opts.Clock.Now())
	next := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if cur != nil {
		next = cur.DeepCopy()
	}
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[MemberLabel] = c.opts.Name
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[BucketsAnnotation] = strconv.Itoa(c.opts.Buckets)
	next.Spec.HolderIdentity = ptr.To(c.opts.Identity)
	next.Spec.LeaseDurationSeconds = ptr.To(c.leases.seconds())
	next.Spec.RenewTime = &now
	if next.Spec.AcquireTime == nil || holder(cur) != c.opts.Identity {
		next.Spec.AcquireTime = &now
	}
	var err error
	if cur == nil {
		c.member, err = c.leases.client.Create(ctx, next, metav1.CreateOptions{})
	} else {
		c.member, err = c.leases.client.Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		c.member = nil // read it again next time
		return fmt.Errorf("renewing member Lease %s: %w", name, err)
	}
	return nil
}

// deleteMember deletes this replica's member Lease, so that the others
// see it gone at once.
func (c *Coordinator) deleteMember(ctx context.Context) error {
	ctx, cancel := c.request(ctx)
	defer cancel()
	name := MemberLeaseName(c.opts.Name, c.opts.Identity)
	var pre *metav1.Preconditions
	if c.member != nil {
		pre = &metav1.Preconditions{UID: ptr.To(c.member.UID)}
	}
	err := c.leases.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting member Lease %s: %w", name, err)
	}
	return nil
}

// liveMembers lists the member Leases and returns the identities of the
// live members announcing this install's number of buckets, sorted, and
// how many live members announce another number.
func (c *Coordinator) liveMembers(ctx context.Context) ([]string, int, error) {
	rctx, cancel := c.request(ctx)
	defer cancel()
	list, err := c.leases.client.List(rctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{MemberLabel: c.opts.Name}).String(),
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing member Leases: %w", err)
	}
	log := klog.FromContext(ctx)
	var live []string
	ignored := 0
	want := strconv.Itoa(c.opts.Buckets)
	listed := map[string]bool{}
	defer c.seenMembers.retain(listed)
	for i := range list.Items {
		l := &list.Items[i]
		listed[l.Name] = true
		if c.seenMembers.expired(l, c.opts.LeaseDuration) {
			c.deleteStaleMember(ctx, l)
			continue
		}
		if got := l.Annotations[BucketsAnnotation]; got != want {
			ignored++
			c.mu.Lock()
			prev, seen := c.ignored[l.Name]
			report := !seen || prev != holder(l)+"/"+got
			c.ignored[l.Name] = holder(l) + "/" + got
			c.mu.Unlock()
			if report {
				log.Error(nil, "Ignoring a member with another number of buckets: give every replica the same --shard-buckets",
					"lease", l.Name, "member", holder(l), "buckets", got, "want", want)
			}
			continue
		}
		live = append(live, holder(l))
	}
	c.mu.Lock()
	for name := range c.ignored {
		if !listed[name] {
			delete(c.ignored, name)
		}
	}
	c.mu.Unlock()
	slices.Sort(live)
	live = slices.Compact(live)
	metrics.ShardMembers.Set(float64(len(live)))
	metrics.ShardMembersIgnored.Set(float64(ignored))
	return live, ignored, nil
}

// staleMemberLeases is how many lease durations a member Lease must have
// stayed unchanged before another replica deletes it: the Lease of a
// replica killed without giving up (SIGKILL, OOM), which would otherwise
// stay for ever, one per identity.
const staleMemberLeases = 10

// deleteStaleMember deletes the member Lease l if it has not changed for
// staleMemberLeases lease durations, with preconditions on its UID and
// resourceVersion, so that a replica that renewed it meanwhile keeps it.
func (c *Coordinator) deleteStaleMember(ctx context.Context, l *coordinationv1.Lease) {
	if c.seenMembers.unchangedFor(l) < staleMemberLeases*c.seenMembers.duration(l, c.opts.LeaseDuration) {
		return
	}
	rctx, cancel := c.request(ctx)
	defer cancel()
	err := c.leases.client.Delete(rctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion)}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "Could not delete the member Lease of a replica gone", "lease", l.Name, "member", holder(l))
		return
	}
	klog.FromContext(ctx).V(1).Info("Deleted the member Lease of a replica gone", "lease", l.Name, "member", holder(l))
}
