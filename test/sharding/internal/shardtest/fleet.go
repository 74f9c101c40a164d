package shardtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/testenv"
)

// MemberLabel is the label of the member Leases, whose value is the lease
// name (docs/scaling.md, Membership and ownership).
const MemberLabel = "metactl.io/shard-member"

// Timing is the leader election's and the sharding's durations the
// replicas run with.
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Fast is the timing of most scenarios: a killed replica's buckets move
// after 4 seconds.
var Fast = Timing{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}

// Buckets is the --shard-buckets of every replica.
const Buckets = 16

// Fleet is the replicas of one scenario: metactl run processes with the
// same Leases.
type Fleet struct {
	env                *testenv.Environment
	leaseNS, leaseName string
	timing             Timing
	Replicas           []*Replica
}

// Replica is one metactl run process.
type Replica struct {
	*testenv.Process
	// Identity is its Metactl-Replica, learnt from its member Lease.
	Identity string
	// Metrics is its /metrics URL.
	Metrics string
	// Removed is when the test sent it SIGTERM or SIGKILL (zero while it
	// runs).
	Removed time.Time
}

// NewFleet returns a fleet whose Leases are in a fresh namespace.
func NewFleet(t *testing.T, env *testenv.Environment, timing Timing) *Fleet {
	return &Fleet{env: env, leaseNS: env.CreateNamespace(t), leaseName: "metactl", timing: timing}
}

// Start starts one more replica and returns once its member Lease
// exists, which names its identity. A replica that could not listen on
// the ports picked for it (taken meanwhile by another process) is started
// again on others, at most three times.
func (f *Fleet) Start(t *testing.T) *Replica {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if r := f.start(t, attempt < 3); r != nil {
			t.Logf("replica %d: %s", len(f.Replicas)+1, r.Identity)
			f.Replicas = append(f.Replicas, r)
			return r
		}
	}
}

// start starts a replica and waits for its member Lease; it returns nil
// when the replica exited because a port was taken and retry is set.
func (f *Fleet) start(t *testing.T, retry bool) *Replica {
	t.Helper()
	mp, hp := testenv.FreePort(t), testenv.FreePort(t)
	args := []string{"run", "--allow-loopback-hooks", "--debug-auth=false", "--kubeconfig", f.env.KubeconfigPath, "--workers", "8",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp), "--health-addr", fmt.Sprintf("127.0.0.1:%d", hp),
		"--leader-elect", "--leader-elect-namespace", f.leaseNS, "--leader-elect-lease-name", f.leaseName,
		"--leader-elect-lease-duration", f.timing.LeaseDuration.String(),
		"--leader-elect-renew-deadline", f.timing.RenewDeadline.String(),
		"--leader-elect-retry-period", f.timing.RetryPeriod.String(),
		"--stop-grace-period", "5s",
		"--shard-buckets", strconv.Itoa(Buckets)}
	known := map[string]bool{}
	for _, r := range f.Replicas {
		known[r.Identity] = true
	}
	r := &Replica{Process: testenv.StartProcess(t, testenv.BuildMetactl(t), args...), Metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)}
	portTaken := false
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("the member Lease of replica %d", len(f.Replicas)+1), func(ctx context.Context) (bool, error) {
		if exited, err := r.Exited(); exited {
			if retry && strings.Contains(r.Output(), "address already in use") {
				portTaken = true
				return true, nil
			}
			t.Fatalf("metactl run exited: %v\n%s", err, testenv.LastLines(r.Output(), 30))
		}
		members, err := f.members(ctx)
		if err != nil {
			return false, err
		}
		for _, id := range members {
			if !known[id] {
				r.Identity = id
				return true, nil
			}
		}
		return false, nil
	})
	if portTaken {
		t.Logf("replica %d could not listen on its ports; starting it again", len(f.Replicas)+1)
		return nil
	}
	return r
}

// members returns the holders of the member Leases.
func (f *Fleet) members(ctx context.Context) ([]string, error) {
	leases, err := f.env.Kube.CoordinationV1().Leases(f.leaseNS).List(ctx, metav1.ListOptions{LabelSelector: MemberLabel + "=" + f.leaseName})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, l := range leases.Items {
		if id := ptr.Deref(l.Spec.HolderIdentity, ""); id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Kill sends r SIGKILL.
func (f *Fleet) Kill(t *testing.T, r *Replica) {
	t.Helper()
	r.Removed = time.Now()
	if err := r.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.Wait(t, 10*time.Second)
}

// Term sends r SIGTERM and fails unless it exits with code 0 within its
// stop grace period (5s) and 15s more to hand its buckets over.
func (f *Fleet) Term(t *testing.T, r *Replica) {
	t.Helper()
	r.Removed = time.Now()
	r.Stop(t, syscall.SIGTERM, 20*time.Second)
}

// Running returns the replicas not removed.
func (f *Fleet) Running() []*Replica {
	var out []*Replica
	for _, r := range f.Replicas {
		if r.Removed.IsZero() {
			out = append(out, r)
		}
	}
	return out
}

// Removals returns when replicas were removed, in order.
func (f *Fleet) Removals() []time.Time {
	var out []time.Time
	for _, r := range f.Replicas {
		if !r.Removed.IsZero() {
			out = append(out, r.Removed)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// Identities returns the identities of all replicas started.
func (f *Fleet) Identities() map[string]bool {
	out := map[string]bool{}
	for _, r := range f.Replicas {
		out[r.Identity] = true
	}
	return out
}

// BucketLease is the name of bucket b's Lease (docs/scaling.md), or of
// the cluster bucket's for b < 0.
func (f *Fleet) BucketLease(b int) string {
	if b < 0 {
		return f.leaseName + "-bucket-cluster"
	}
	return f.leaseName + "-bucket-" + strconv.Itoa(b)
}

// holders returns the holder of each Lease of the fleet's namespace, by
// name.
func (f *Fleet) holders(ctx context.Context) (map[string]string, error) {
	leases, err := f.env.Kube.CoordinationV1().Leases(f.leaseNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range leases.Items {
		out[l.Name] = ptr.Deref(l.Spec.HolderIdentity, "")
	}
	return out, nil
}
