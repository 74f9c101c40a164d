//go:build integration

package manager_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// serveExplain runs a manager built from opts until the test ends and
// serves its explain endpoint; it returns the endpoint's address.
func serveExplain(t *testing.T, opts manager.Options) string {
	t.Helper()
	m, err := manager.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	mux := http.NewServeMux()
	mux.Handle(explain.Path, explain.Handler(m))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestExplainLeaderAndStandby: under leader election the leader's
// endpoint names the controller of a parent, and a standby's says it does
// not lead and knows no controller.
func TestExplainLeaderAndStandby(t *testing.T) {
	gvr := createCRD(t, "explain.test.metactl.io", "gadgets", "Gadget")
	ns := env.CreateNamespace(t)
	election := func(identity string) *manager.LeaderElection {
		return &manager.LeaderElection{Namespace: ns, Name: "explain", Identity: identity,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond}
	}
	req := explain.Request{Group: gvr.Group, Version: "v1", Resource: gvr.Resource, Namespace: ns, Name: "g1"}
	leader := serveExplain(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond, LeaderElection: election("leader"),
		HistoryMaxBytes: manager.DefaultHistoryMaxBytes})
	testenv.Eventually(t, 30*time.Second, "the first manager leads", func(ctx context.Context) (bool, error) {
		a, err := explain.Fetch(ctx, http.DefaultClient, leader, req)
		return err == nil && a.Process.Leading, err
	})
	standby := serveExplain(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond, LeaderElection: election("standby"),
		HistoryMaxBytes: manager.DefaultHistoryMaxBytes})

	h := newHook(t, "explained")
	cc := compositeController("explain-gadgets", h.URL)
	_ = unstructured.SetNestedField(cc.Object, map[string]any{"apiVersion": gvr.GroupVersion().String(), "resource": gvr.Resource}, "spec", "parentResource")
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if _, err := ccs.Create(context.Background(), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ccs.Delete(context.Background(), cc.GetName(), metav1.DeleteOptions{}) })
	gadget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": "Gadget",
		"metadata": map[string]any{"name": "g1", "namespace": ns}}}
	if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), gadget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMapsGVR, ns, "g1-explained")

	testenv.Eventually(t, 30*time.Second, "the leader names the controller of g1, synced", func(ctx context.Context) (bool, error) {
		a, err := explain.Fetch(ctx, http.DefaultClient, leader, req)
		if err != nil {
			return false, err
		}
		return len(a.Controllers) == 1 && a.Controllers[0].Name == "explain-gadgets" && a.Controllers[0].Role == explain.RoleParent &&
			a.Controllers[0].State.Phase == explain.PhaseSynced, nil
	})
	a, err := explain.Fetch(context.Background(), http.DefaultClient, standby, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Process.Leading || len(a.Controllers) != 0 || a.Process.Name == "" {
		t.Errorf("the standby answered %+v, want not leading, no controller, its name", a)
	}
}

// TestExplainAfterTheLeaseIsLost: a leader whose Lease another replica
// took answers that it does not lead, from the moment it lost it.
func TestExplainAfterTheLeaseIsLost(t *testing.T) {
	ns := env.CreateNamespace(t)
	le := &manager.LeaderElection{Namespace: ns, Name: "lost", Identity: "leader",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond}
	m, err := manager.New(manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond, LeaderElection: le})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	req := explain.Request{Version: "v1", Resource: "configmaps", Namespace: ns, Name: "x"}
	testenv.Eventually(t, 30*time.Second, "the manager leads", func(ctx context.Context) (bool, error) {
		a, err := m.Explain(ctx, req)
		return err == nil && a.Process.Leading, err
	})
	// Another replica takes the Lease.
	leases := env.Kube.CoordinationV1().Leases(ns)
	testenv.Eventually(t, 30*time.Second, "the Lease taken by another", func(ctx context.Context) (bool, error) {
		lease, err := leases.Get(ctx, "lost", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		lease.Spec.HolderIdentity = ptr.To("thief")
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(3600))
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err == nil, nil
	})
	select {
	case err := <-done:
		if !errors.Is(err, manager.ErrLeadershipLost) {
			t.Fatalf("Run returned %v, want ErrLeadershipLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of losing the Lease")
	}
	a, err := m.Explain(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Process.Leading {
		t.Error("a manager that lost its Lease answers that it leads")
	}
}
