//go:build integration

package manager_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// gaugeValue returns the value of the series of the gauge vector named
// name with exactly the labels want, read from metrics.Registry, and
// whether it exists.
func gaugeValue(t *testing.T, name string, want prometheus.Labels) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			same := len(m.GetLabel()) == len(want)
			for _, l := range m.GetLabel() {
				same = same && want[l.GetName()] == l.GetValue()
			}
			if same {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// waitGauge waits until the series of name with labels is value, or, for
// value nil, until it is gone.
func waitGauge(t *testing.T, name string, labels prometheus.Labels, value *float64) {
	t.Helper()
	what := name + " gone"
	if value != nil {
		what = fmt.Sprintf("%s %v = %v", name, labels, *value)
	}
	testenv.Eventually(t, 30*time.Second, what, func(context.Context) (bool, error) {
		got, ok := gaugeValue(t, name, labels)
		if value == nil {
			return !ok, nil
		}
		return ok && got == *value, nil
	})
}

// TestControllerMetrics checks the per-controller gauges the alert rules of
// manifests/monitoring rely on: metactl_controller_ready follows the
// controller object's Ready condition (0 for a controller that does not
// run, 1 for one that does, gone with the object), and
// metactl_hook_timeout_seconds gives each running controller's hooks'
// timeouts (the webhook's, else the default 10s); metactl_leader is 1 for
// a manager that runs without leader election.
func TestControllerMetrics(t *testing.T) {
	stop := runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)

	unknown := compositeController("metrics-unknown", "http://127.0.0.1:1/sync")
	unknown.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "nosuchthings"}
	if _, err := ccs.Create(ctx, unknown, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := compositeController("metrics-running", "http://127.0.0.1:1/sync")
	spec := running.Object["spec"].(map[string]any)
	spec["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "secrets"}
	spec["hooks"] = map[string]any{
		"sync":     map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/sync", "timeout": "3s"}},
		"finalize": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/finalize"}},
	}
	if _, err := ccs.Create(ctx, running, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "metrics-unknown", metav1.ConditionFalse, v1alpha1.ReasonUnknownResource)
	waitReady(t, "metrics-running", metav1.ConditionTrue, v1alpha1.ReasonRunning)

	readyOf := func(name string) prometheus.Labels {
		return prometheus.Labels{"kind": "CompositeController", "controller": name}
	}
	waitGauge(t, "metactl_controller_ready", readyOf("metrics-unknown"), ptr.To[float64](0))
	waitGauge(t, "metactl_controller_ready", readyOf("metrics-running"), ptr.To[float64](1))
	waitGauge(t, "metactl_hook_timeout_seconds", prometheus.Labels{"controller": "metrics-running", "hook": "sync"}, ptr.To[float64](3))
	waitGauge(t, "metactl_hook_timeout_seconds", prometheus.Labels{"controller": "metrics-running", "hook": "finalize"}, ptr.To[float64](10))
	if _, ok := gaugeValue(t, "metactl_hook_timeout_seconds", prometheus.Labels{"controller": "metrics-unknown", "hook": "sync"}); ok {
		t.Error("metactl_hook_timeout_seconds has a series for a controller that does not run")
	}
	if v, _ := gaugeValue(t, "metactl_leader", prometheus.Labels{}); v != 1 {
		t.Errorf("metactl_leader = %v for a manager without leader election, want 1", v)
	}

	for _, name := range []string{"metrics-unknown", "metrics-running"} {
		if err := ccs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGauge(t, "metactl_controller_ready", readyOf(name), nil)
	}
	waitGauge(t, "metactl_hook_timeout_seconds", prometheus.Labels{"controller": "metrics-running", "hook": "sync"}, nil)
	stop()
	if v, _ := gaugeValue(t, "metactl_leader", prometheus.Labels{}); v != 0 {
		t.Errorf("metactl_leader = %v once the manager stopped, want 0", v)
	}
}

// TestHookTimeoutOfSameNamedControllers: a CompositeController and a
// DecoratorController may share a name, and so the series of
// metactl_hook_timeout_seconds (it has no kind label); stopping one
// deletes only its own hooks' series and leaves the other's values.
func TestHookTimeoutOfSameNamedControllers(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	const name = "metrics-twin"
	cc := compositeController(name, "http://127.0.0.1:1/sync")
	spec := cc.Object["spec"].(map[string]any)
	spec["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "secrets"}
	spec["hooks"] = map[string]any{
		"sync":     map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/sync", "timeout": "3s"}},
		"finalize": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/finalize"}},
	}
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "DecoratorController",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}},
			"hooks": map[string]any{
				"sync":      map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/sync", "timeout": "4s"}},
				"customize": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/customize", "timeout": "7s"}},
			},
		},
	}}
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	dcs := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
	if _, err := dcs.Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	series := func(hook string) prometheus.Labels { return prometheus.Labels{"controller": name, "hook": hook} }
	waitGauge(t, "metactl_hook_timeout_seconds", series("customize"), ptr.To[float64](7))
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	waitGauge(t, "metactl_hook_timeout_seconds", series("finalize"), ptr.To[float64](10))

	if err := ccs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGauge(t, "metactl_hook_timeout_seconds", series("finalize"), nil)
	for hook, want := range map[string]float64{"sync": 4, "customize": 7} {
		if got, ok := gaugeValue(t, "metactl_hook_timeout_seconds", series(hook)); !ok || got != want {
			t.Errorf("the DecoratorController's %s hook timeout: %v (present %t) once the CompositeController stopped, want %v", hook, got, ok, want)
		}
	}

	if err := dcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGauge(t, "metactl_hook_timeout_seconds", series("customize"), nil)
	if _, ok := gaugeValue(t, "metactl_hook_timeout_seconds", series("sync")); ok {
		t.Error("the sync hook's timeout is left once both controllers stopped")
	}
}

// seriesNaming returns the families of metrics.Registry with a series
// whose label label is value.
func seriesNaming(t *testing.T, label, value string) []string {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					out = append(out, f.GetName())
				}
			}
		}
	}
	return out
}

// TestDeletedControllerLeavesNoSeries: a controller that synced has
// series in the syncs', hooks', writes' and work queue's metrics; once its
// object is deleted, none labelled with its name is left in the registry
// (the registry is gathered as /metrics serves it), while a
// DecoratorController of the same name keeps its own until it goes too.
func TestDeletedControllerLeavesNoSeries(t *testing.T) {
	applyWidgetsCRD(t)
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	const name = "metrics-deleted"
	h := newHook(t, "m")
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	dcs := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
	cc := compositeController(name, h.URL)
	cc.Object["spec"].(map[string]any)["parentResource"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{"test": name}}
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, name, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	ns := env.CreateNamespace(t)
	newWidget(t, ns, name, "w")
	waitObject(t, configMapsGVR, ns, "w-m")
	want := []string{"metactl_controller_ready", "metactl_hook_requests_total", "metactl_hook_duration_seconds",
		"metactl_hook_timeout_seconds", "metactl_syncs_total", "metactl_sync_duration_seconds", "metactl_object_writes_total"}
	testenv.Eventually(t, 30*time.Second, "the controller's series", func(context.Context) (bool, error) {
		got := seriesNaming(t, "controller", name)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false, nil
			}
		}
		return len(seriesNaming(t, "name", name)) > 0, nil
	})

	// A DecoratorController of the same name shares the series: they stay
	// while it exists.
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://127.0.0.1:1/sync", "timeout": "4s"}}},
		},
	}}
	if _, err := dcs.Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	decoratorReady := prometheus.Labels{"kind": "DecoratorController", "controller": name}
	waitGauge(t, "metactl_controller_ready", decoratorReady, ptr.To[float64](1))
	if err := ccs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGauge(t, "metactl_controller_ready", prometheus.Labels{"kind": "CompositeController", "controller": name}, nil)
	if got := seriesNaming(t, "controller", name); !slices.Contains(got, "metactl_syncs_total") {
		t.Errorf("with a DecoratorController of the same name left, its series are gone: %v", got)
	}

	if err := dcs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "no series of the deleted controllers", func(context.Context) (bool, error) {
		return len(seriesNaming(t, "controller", name)) == 0 && len(seriesNaming(t, "name", name)) == 0, nil
	})
}
