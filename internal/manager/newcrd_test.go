//go:build integration

package manager_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestNewCRDIsSeenAtOnce: a CompositeController of a resource not yet
// served waits (UnknownResource); once its CRD is created, it starts and
// syncs parents within seconds. Neither fallback can pass the test: the
// periodic discovery refresh is set to an hour, and the waiting
// controller's retries (500ms doubling) are by then 16s apart: the new CRD
// itself makes metactl look again.
func TestNewCRDIsSeenAtOnce(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: time.Hour})
	ctx := context.Background()
	h := newHook(t, "seen")
	cc := compositeController("sprockets", h.URL)
	cc.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "new-crd.metactl.io/v1", "resource": "sprockets"}
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), "sprockets", metav1.DeleteOptions{})
	})
	created := time.Now()
	waitReady(t, "sprockets", metav1.ConditionFalse, v1alpha1.ReasonUnknownResource)
	// Retries at about 0, 0.5, 1.5, 3.5, 7.5, 15.5 and 31.5s: at 20s the
	// next one is more than 10s away.
	testenv.Eventually(t, time.Minute, "20s of UnknownResource", func(context.Context) (bool, error) {
		return time.Since(created) >= 20*time.Second, nil
	})

	sprockets := createCRD(t, "new-crd.metactl.io", "sprockets", "Sprocket") // returns once Established
	established := time.Now()
	// Discovery sees it after the API server's own discovery caught up
	// (about a second), then the controller starts its informers: 5s is
	// ample, and less than the time to the next retry.
	testenv.Eventually(t, 5*time.Second, "sprockets Ready=True (Running) soon after the CRD", func(context.Context) (bool, error) {
		c := readyCondition(t, "sprockets")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRunning, nil
	})
	t.Logf("running %v after the CRD was established", time.Since(established).Round(100*time.Millisecond))
	ns := env.CreateNamespace(t)
	s := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "new-crd.metactl.io/v1", "kind": "Sprocket",
		"metadata": map[string]any{"name": "s1", "namespace": ns}}}
	if _, err := env.Dynamic.Resource(sprockets).Namespace(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMapsGVR, ns, "s1-seen")
}
