package operations

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/testenv"
)

// TestLeaderThatLosesItsLeaseExits takes the Lease from a running leader
// (another holder renews it, as a replica would after a network partition)
// while one of its syncs waits on a hook that hangs: the leader exits, with
// an error, within its renew deadline, without waiting for that sync.
func TestLeaderThatLosesItsLeaseExits(t *testing.T) {
	ns := env.CreateNamespace(t)
	called := make(chan struct{}, 1)
	hang := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{}})
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() { close(hang) }) // runs before hook.Close
	createController(t, "deposed", hook.URL, "secrets")
	const renewDeadline, retryPeriod = 3 * time.Second, 500 * time.Millisecond
	p, metrics, _ := metactlRun(t, "--leader-elect", "--leader-elect-namespace", ns, "--leader-elect-lease-name", "deposed",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", renewDeadline.String(),
		"--leader-elect-retry-period", retryPeriod.String())
	testenv.Eventually(t, 30*time.Second, "metactl to lead", metricIs(metrics, "metactl_leader", 1))
	createParent(t, ns, "p1", "deposed")
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("the hook was not called")
	}

	leases := env.Kube.CoordinationV1().Leases(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(ctx(t), "deposed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity = ptr.To("another-replica")
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(60))
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		_, err = leases.Update(ctx(t), lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()
	if exited, _ := p.Exited(); exited {
		t.Fatalf("metactl exited before its Lease was taken:\n%s", testenv.LastLines(p.Output(), 20))
	}

	// It stops renewing after the renew deadline; it sees the new holder at
	// its next attempt, each up to 1.1s apart (500ms with client-go's
	// jitter of 1.2); 1.5s more for a loaded machine.
	bound := renewDeadline + 2*1100*time.Millisecond + 1500*time.Millisecond
	select {
	case <-p.Done():
	case <-time.After(bound - time.Since(stolen)):
		t.Fatalf("metactl still runs %v after losing its Lease, with a sync in flight", bound)
	}
	t.Logf("exited %v after the Lease was taken", time.Since(stolen).Round(100*time.Millisecond))
	if _, err := p.Exited(); err == nil {
		t.Error("metactl exited with code 0 after losing its Lease, want an error")
	}
	if !strings.Contains(p.Output(), "lost the leader lease") {
		t.Errorf("metactl did not log why it exited:\n%s", testenv.LastLines(p.Output(), 20))
	}
	lease, err := leases.Get(ctx(t), "deposed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(lease.Spec.HolderIdentity, ""); got != "another-replica" {
		t.Errorf("the Lease is held by %q after the leader exited, want the new holder", got)
	}
}
