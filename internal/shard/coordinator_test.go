package shard

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/metrics"
)

const testNamespace = "metactl-system"

// calls records what a Coordinator told its callbacks.
type calls struct {
	mu        sync.Mutex
	holds     []Set
	activated []Set
	cluster   []bool
	released  int
	// onHold, if set, is called in Hold, before it returns.
	onHold func(Set)
}

func (c *calls) options(o *Options) {
	o.Hold = func(_ context.Context, s Set) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.holds = append(c.holds, s)
		if c.onHold != nil {
			c.onHold(s)
		}
		return nil
	}
	o.Activated = func(s Set, cluster bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.activated = append(c.activated, s)
		c.cluster = append(c.cluster, cluster)
	}
	o.ReleaseCluster = func(context.Context) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.released++
	}
}

// newClient returns a fake clientset holding objects that, unlike the
// bare fake, gives every Lease written a new resourceVersion, as the API
// server does: the Coordinator sees a Lease change by its version.
func newClient(objects ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objects...)
	var mu sync.Mutex
	version := 100
	client.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() != "create" && a.GetVerb() != "update" {
			return false, nil, nil
		}
		obj := a.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease)
		mu.Lock()
		version++
		obj.ResourceVersion = strconv.Itoa(version)
		mu.Unlock()
		return false, nil, nil // the tracker stores it
	})
	return client
}

func newTestCoordinator(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock, identity string, cl *calls) *Coordinator {
	t.Helper()
	o := Options{
		Leases: client.CoordinationV1(), Namespace: testNamespace, Name: "metactl", Identity: identity, Buckets: 4,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Clock: clk,
	}
	if cl != nil {
		cl.options(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getLease(t *testing.T, client *fake.Clientset, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := client.CoordinationV1().Leases(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestNewSaysWhatToFix checks the errors of New.
func TestNewSaysWhatToFix(t *testing.T) {
	_, err := New(Options{Name: "Metactl_x", Buckets: 0, LeaseDuration: 5 * time.Second, RenewDeadline: 5 * time.Second})
	for _, want := range []string{"Leases is nil", "Namespace is empty", "does not make valid Lease names", "Identity is empty", "Buckets is 0", "RenewDeadline 5s is not less than LeaseDuration 5s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to say %q", err, want)
		}
	}
	c, err := New(Options{Leases: fake.NewClientset().CoordinationV1(), Namespace: "n", Name: "metactl", Identity: "a_b", Buckets: 32})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.opts; o.LeaseDuration != 15*time.Second || o.RenewDeadline != 10*time.Second || o.RetryPeriod != 2*time.Second || o.StopGracePeriod != 10*time.Second || o.CancelWait != 5*time.Second {
		t.Errorf("defaults: %+v", o)
	}
	if got := MemberLeaseName("metactl", "host_1234"); !strings.HasPrefix(got, "metactl-member-") || len(got) != len("metactl-member-")+8 {
		t.Errorf("MemberLeaseName = %q", got)
	}
}

// TestTakeRenewRelease checks a lone replica's rounds: it writes its
// member Lease, takes every bucket (Hold before activation, one Hold for
// all), renews their Leases, and on giving up drains, shrinks the caches,
// stops the whole controllers and empties the holders.
func TestTakeRenewRelease(t *testing.T) {
	ctx := context.Background()
	client := newClient()
	clk := clocktesting.NewFakeClock(time.Now())
	cl := &calls{}
	c := newTestCoordinator(t, client, clk, "host_a", cl)
	// Hold must see the buckets it adds still inactive, and those it
	// drops already inactive but their Leases still held.
	var holdSaw []string
	cl.onHold = func(s Set) {
		holdSaw = append(holdSaw, c.Owned().String())
		l, err := client.CoordinationV1().Leases(testNamespace).Get(ctx, BucketLeaseName("metactl", 1), metav1.GetOptions{})
		if err == nil && holder(l) != "host_a" {
			t.Errorf("Hold(%v) called with bucket 1's Lease held by %q", s, holder(l))
		}
	}
	if err := c.renewMember(ctx); err != nil {
		t.Fatal(err)
	}
	m := getLease(t, client, MemberLeaseName("metactl", "host_a"))
	if m.Labels[MemberLabel] != "metactl" || m.Annotations[BucketsAnnotation] != "4" || holder(m) != "host_a" || ptr.Deref(m.Spec.LeaseDurationSeconds, 0) != 15 {
		t.Fatalf("member Lease: %+v", m)
	}

	c.round(ctx)
	if !c.Owned().Equal(All(4)) || !c.OwnsCluster() {
		t.Fatalf("a lone replica owns %v, cluster %v; want all", c.Owned(), c.OwnsCluster())
	}
	if len(cl.holds) != 1 || !cl.holds[0].Equal(All(4)) || len(cl.activated) != 1 || !cl.activated[0].Equal(All(4)) || !cl.cluster[0] {
		t.Fatalf("callbacks: holds %v, activated %v %v; want one Hold and one Activated of all", cl.holds, cl.activated, cl.cluster)
	}
	for _, b := range []Bucket{0, 1, 2, 3, cluster} {
		if l := getLease(t, client, BucketLeaseName("metactl", b)); holder(l) != "host_a" || l.Labels[BucketLabel] != "metactl" {
			t.Fatalf("%s held by %q, labels %v", l.Name, holder(l), l.Labels)
		}
	}
	if v := testutil.ToFloat64(metrics.ShardBucketOwned.WithLabelValues("cluster")); v != 1 {
		t.Errorf("metactl_shard_bucket_owned{bucket=cluster} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(metrics.ShardMembers); v != 1 {
		t.Errorf("metactl_shard_members = %v, want 1", v)
	}

	before := getLease(t, client, BucketLeaseName("metactl", 2)).Spec.RenewTime.Time
	clk.Step(2 * time.Second)
	c.renewAll(ctx)
	if after := getLease(t, client, BucketLeaseName("metactl", 2)).Spec.RenewTime.Time; !after.After(before) {
		t.Fatalf("renewTime %v not renewed (was %v)", after, before)
	}

	released := testutil.ToFloat64(metrics.ShardHandovers.WithLabelValues("released"))
	c.giveUp(ctx, []Bucket{1, cluster})
	if v := testutil.ToFloat64(metrics.ShardHandovers.WithLabelValues("released")) - released; v != 2 {
		t.Errorf("metactl_shard_handovers_total{direction=released} rose by %v, want 2", v)
	}
	if v := testutil.ToFloat64(metrics.ShardBucketOwned.WithLabelValues("1")); v != 0 {
		t.Errorf("metactl_shard_bucket_owned{bucket=1} = %v after giving it up, want 0", v)
	}
	want, _ := NewSet(4, 0, 2, 3)
	if !c.Owned().Equal(want) || c.OwnsCluster() {
		t.Fatalf("after giving up 1 and cluster, owns %v, cluster %v", c.Owned(), c.OwnsCluster())
	}
	if last := cl.holds[len(cl.holds)-1]; !last.Equal(want) || cl.released != 1 {
		t.Fatalf("giving up: last Hold %v, ReleaseCluster called %d times", last, cl.released)
	}
	if len(holdSaw) != 2 || holdSaw[0] != "none of 4" || holdSaw[1] != "0,2-3 of 4" {
		t.Errorf("Hold saw the active buckets %q, want none active while taking and 0,2-3 while giving up 1", holdSaw)
	}
	for _, b := range []Bucket{1, cluster} {
		if l := getLease(t, client, BucketLeaseName("metactl", b)); holder(l) != "" {
			t.Fatalf("%s still held by %q after giving it up", l.Name, holder(l))
		}
	}
	if l := getLease(t, client, BucketLeaseName("metactl", 0)); holder(l) != "host_a" {
		t.Fatalf("bucket 0 kept, but its Lease is held by %q", holder(l))
	}
}

// TestTakesOnlyFreeLeases checks that a bucket whose Lease another
// replica holds is not taken until it has not changed for the lease
// duration, timed by this replica's clock from when it first saw it.
func TestTakesOnlyFreeLeases(t *testing.T) {
	ctx := context.Background()
	client := newClient(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "metactl-bucket-1", Namespace: testNamespace, ResourceVersion: "7"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("host_gone"), LeaseDurationSeconds: ptr.To[int32](15),
			// A renewTime long past, by a clock that is not this replica's.
			RenewTime: &metav1.MicroTime{Time: time.Now().Add(-time.Hour)},
		},
	})
	clk := clocktesting.NewFakeClock(time.Now())
	c := newTestCoordinator(t, client, clk, "host_a", nil)
	if err := c.renewMember(ctx); err != nil {
		t.Fatal(err)
	}
	c.round(ctx)
	if c.Owned().Has(1) || c.Owned().Len() != 3 {
		t.Fatalf("owns %v: took a Lease held by another before it expired by this replica's clock", c.Owned())
	}
	clk.Step(14 * time.Second)
	_ = c.renewMember(ctx)
	c.round(ctx)
	if c.Owned().Has(1) {
		t.Fatal("took a Lease before the lease duration")
	}
	clk.Step(time.Second)
	_ = c.renewMember(ctx)
	c.round(ctx)
	if !c.Owned().Has(1) {
		t.Fatalf("owns %v: did not take a Lease unchanged for the lease duration", c.Owned())
	}
	if l := getLease(t, client, "metactl-bucket-1"); holder(l) != "host_a" || ptr.Deref(l.Spec.LeaseTransitions, 0) != 1 {
		t.Fatalf("bucket 1 Lease after taking: holder %q, transitions %d", holder(l), ptr.Deref(l.Spec.LeaseTransitions, 0))
	}
}

// TestRenewFailureDeactivatesAtTheDeadline checks that a bucket whose
// Lease cannot be renewed stays active until the renew deadline, then is
// deactivated with its syncs cancelled at once, before the lease
// duration, and its Lease is not released.
func TestRenewFailureDeactivatesAtTheDeadline(t *testing.T) {
	ctx := context.Background()
	client := newClient()
	clk := clocktesting.NewFakeClock(time.Now())
	cl := &calls{}
	c := newTestCoordinator(t, client, clk, "host_a", cl)
	if err := c.renewMember(ctx); err != nil {
		t.Fatal(err)
	}
	c.round(ctx)
	if !c.Owned().Equal(All(4)) {
		t.Fatalf("owns %v", c.Owned())
	}
	syncCtx, done, ok := c.Gate().Begin(ctx, namespaceOf(t, 2, 4))
	if !ok {
		t.Fatal("Begin refused an owned bucket")
	}
	defer done()
	wholeCtx, wholeDone, ok := c.WholeGate().Begin(ctx, "any")
	if !ok {
		t.Fatal("WholeGate refused while the cluster bucket is owned")
	}
	defer wholeDone()

	var broken bool
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return broken, nil, errors.New("API server unreachable")
	})
	broken = true
	clk.Step(2 * time.Second)
	c.renewAll(ctx)
	clk.Step(7 * time.Second) // 9s since the last renewal
	c.renewAll(ctx)
	c.expire(ctx)
	if !c.Owned().Equal(All(4)) || syncCtx.Err() != nil {
		t.Fatalf("before the renew deadline: owns %v, sync ctx %v", c.Owned(), syncCtx.Err())
	}
	lost := testutil.ToFloat64(metrics.ShardHandovers.WithLabelValues("lost"))
	clk.Step(time.Second) // 10s: the renew deadline, 5s before the lease duration
	c.expire(ctx)
	if v := testutil.ToFloat64(metrics.ShardHandovers.WithLabelValues("lost")) - lost; v != 5 {
		t.Errorf("metactl_shard_handovers_total{direction=lost} rose by %v, want 5", v)
	}
	if c.Owned().Len() != 0 || c.OwnsCluster() || c.Gate().Admits(namespaceOf(t, 2, 4)) || c.WholeGate().Admits("any") {
		t.Fatalf("at the renew deadline: owns %v, cluster %v; want nothing", c.Owned(), c.OwnsCluster())
	}
	if syncCtx.Err() == nil || wholeCtx.Err() == nil {
		t.Fatal("the syncs of a lost bucket were not cancelled at once")
	}
	broken = false
	done() // the syncs end, cancelled
	wholeDone()
	c.drainLost(ctx)
	if last := cl.holds[len(cl.holds)-1]; last.Len() != 0 || cl.released != 1 {
		t.Fatalf("after losing every bucket: last Hold %v, ReleaseCluster called %d times", last, cl.released)
	}
	if l := getLease(t, client, BucketLeaseName("metactl", 2)); holder(l) != "host_a" {
		t.Fatalf("a lost Lease was written (holder %q): it may be another's by now", holder(l))
	}
}

// TestStaleMemberLeasesAreDeleted checks that the member Lease of a
// replica gone without deleting it is deleted once unchanged for
// staleMemberLeases lease durations, and not before.
func TestStaleMemberLeasesAreDeleted(t *testing.T) {
	ctx := context.Background()
	gone := MemberLeaseName("metactl", "host_gone")
	client := newClient(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: gone, Namespace: testNamespace, ResourceVersion: "7", Labels: map[string]string{MemberLabel: "metactl"}, Annotations: map[string]string{BucketsAnnotation: "4"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("host_gone"), LeaseDurationSeconds: ptr.To[int32](15)},
	})
	clk := clocktesting.NewFakeClock(time.Now())
	c := newTestCoordinator(t, client, clk, "host_a", nil)
	exists := func() bool {
		_, err := client.CoordinationV1().Leases(testNamespace).Get(ctx, gone, metav1.GetOptions{})
		return err == nil
	}
	for range 9 {
		_ = c.renewMember(ctx)
		if _, _, err := c.liveMembers(ctx); err != nil {
			t.Fatal(err)
		}
		if !exists() {
			t.Fatalf("deleted a member Lease unchanged for less than %d lease durations", staleMemberLeases)
		}
		clk.Step(15 * time.Second)
	}
	clk.Step(15 * time.Second)
	_ = c.renewMember(ctx)
	live, _, err := c.liveMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exists() {
		t.Fatalf("a member Lease unchanged for %d lease durations was not deleted", staleMemberLeases)
	}
	if len(live) != 1 || live[0] != "host_a" {
		t.Fatalf("live members %v, want host_a alone", live)
	}
}

// TestTakesNothingBesideAnotherNumberOfBuckets checks that a replica
// takes no bucket while a live member announces another number of
// buckets (a rolling update of --shard-buckets): that member's bucket
// Leases guard other namespaces than this replica's of the same name.
func TestTakesNothingBesideAnotherNumberOfBuckets(t *testing.T) {
	ctx := context.Background()
	other := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName("metactl", "host_old"), Namespace: testNamespace, ResourceVersion: "7",
			Labels: map[string]string{MemberLabel: "metactl"}, Annotations: map[string]string{BucketsAnnotation: "16"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("host_old"), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	client := newClient(other)
	clk := clocktesting.NewFakeClock(time.Now())
	c := newTestCoordinator(t, client, clk, "host_a", &calls{})
	if err := c.renewMember(ctx); err != nil {
		t.Fatal(err)
	}
	c.round(ctx)
	if c.Owned().Len() != 0 || c.OwnsCluster() {
		t.Fatalf("took %v (cluster %v) beside a live member of 16 buckets", c.Owned(), c.OwnsCluster())
	}
	if v := testutil.ToFloat64(metrics.ShardMembersIgnored); v != 1 {
		t.Errorf("metactl_shard_members_ignored = %v, want 1", v)
	}
	// Gone (its Lease deleted at its SIGTERM): the buckets are taken.
	if err := client.CoordinationV1().Leases(testNamespace).Delete(ctx, other.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.round(ctx)
	if !c.Owned().Equal(All(4)) || !c.OwnsCluster() {
		t.Fatalf("alone again, owns %v (cluster %v); want all", c.Owned(), c.OwnsCluster())
	}
}
