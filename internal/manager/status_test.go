//go:build integration

package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// controllerStatus reads the status of the controller object name of
// resource gvr; nil while its observedGeneration lags.
func controllerStatus(ctx context.Context, gvr schema.GroupVersionResource, name string) (*v1alpha1.ControllerStatus, error) {
	obj, err := env.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var status v1alpha1.ControllerStatus
	if raw, ok := obj.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
			return nil, err
		}
	}
	if status.ObservedGeneration != obj.GetGeneration() {
		return nil, nil
	}
	return &status, nil
}

// waitFailing waits until the controller object shows count failing
// objects, Ready=True and a Synced condition that agrees, and returns its
// status.
func waitFailing(t *testing.T, gvr schema.GroupVersionResource, name string, count int32, timeout time.Duration) *v1alpha1.ControllerStatus {
	t.Helper()
	var got *v1alpha1.ControllerStatus
	testenv.Eventually(t, timeout, fmt.Sprintf("%s %s showing %d failing objects", gvr.Resource, name, count), func(ctx context.Context) (bool, error) {
		status, err := controllerStatus(ctx, gvr, name)
		if err != nil || status == nil {
			return false, err
		}
		got = status
		ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
		synced := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionSynced)
		wantSynced := metav1.ConditionTrue
		if count > 0 {
			wantSynced = metav1.ConditionFalse
		}
		ok := status.FailingObjects == count && ready != nil && ready.Status == metav1.ConditionTrue &&
			synced != nil && synced.Status == wantSynced
		if !ok {
			return false, fmt.Errorf("status %+v", status)
		}
		return true, nil
	})
	return got
}

// TestFailingObjectsAreShown runs a CompositeController and a
// DecoratorController whose hook fails for every object: each stays
// Ready=True (it runs) and shows the count of failing objects and a Synced
// condition naming them, in kubectl's columns too; a burst of failing syncs
// makes few status writes; once the hook recovers, the count goes back to 0.
func TestFailingObjectsAreShown(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	ns := env.CreateNamespace(t)
	// A group of its own: the CRD of an earlier run may still be going.
	gadgets := createCRD(t, ns+".metactl.io", "gadgets", "Gadget")
	apiVersion := gadgets.GroupVersion().String()

	var broken atomic.Bool
	var calls atomic.Int64
	broken.Store(true)
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if broken.Load() {
			// An error that differs on every call: each failing sync
			// changes the last error.
			http.Error(w, fmt.Sprintf("broken (call %d)", n), http.StatusInternalServerError)
			return
		}
		if r.URL.Path == "/decorator" {
			_, _ = w.Write([]byte(`{"attachments": []}`))
			return
		}
		_, _ = w.Write([]byte(`{"children": []}`))
	}))
	t.Cleanup(h.Close)

	const parents = 4
	for i := range parents {
		gadget := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": "Gadget",
			"metadata": map[string]any{"name": fmt.Sprintf("g%d", i), "namespace": ns},
		}}
		if _, err := env.Dynamic.Resource(gadgets).Namespace(ns).Create(ctx, gadget, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	dcs := env.Dynamic.Resource(v1alpha1.DecoratorControllerResource)
	cc := compositeController("failing-gadgets", h.URL+"/composite")
	spec := cc.Object["spec"].(map[string]any)
	spec["parentResource"] = map[string]any{"apiVersion": apiVersion, "resource": "gadgets"}
	delete(spec, "childResources")
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "failing-gadgets"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": apiVersion, "resource": "gadgets"}},
			"hooks":     map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.URL + "/decorator"}}},
		},
	}}
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dcs.Create(ctx, dc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ccs.Delete(context.Background(), "failing-gadgets", metav1.DeleteOptions{})
		_ = dcs.Delete(context.Background(), "failing-gadgets", metav1.DeleteOptions{})
	})

	// Every parent fails: shown within the first retries plus one
	// FailingStatusInterval.
	bound := 15*time.Second + manager.FailingStatusInterval
	for _, gvr := range []schema.GroupVersionResource{v1alpha1.CompositeControllerResource, v1alpha1.DecoratorControllerResource} {
		status := waitFailing(t, gvr, "failing-gadgets", parents, bound)
		synced := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionSynced)
		ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
		for _, want := range []string{"4 objects failed their last sync", ns + "/g0", ns + "/g1", ns + "/g2", "and 1 more", "HTTP 500"} {
			if !strings.Contains(synced.Message, want) {
				t.Errorf("%s: Synced message %q lacks %q", gvr.Resource, synced.Message, want)
			}
		}
		if synced.Reason != v1alpha1.ReasonSyncErrors || ready.Reason != v1alpha1.ReasonRunning || !strings.Contains(ready.Message, "4 objects failed") {
			t.Errorf("%s: Synced %+v, Ready %+v", gvr.Resource, synced, ready)
		}
	}
	if !t.Failed() {
		// The decorator names the resource of its objects.
		status, _ := controllerStatus(ctx, v1alpha1.DecoratorControllerResource, "failing-gadgets")
		if synced := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionSynced); !strings.Contains(synced.Message, "gadgets "+ns+"/g0") {
			t.Errorf("decoratorcontroller: Synced message %q does not name gadgets %s/g0", synced.Message, ns)
		}
	}

	// kubectl shows the count, and the Ready message with -o wide.
	for _, resource := range []string{"compositecontrollers", "decoratorcontrollers"} {
		out, err := env.Kubectl(ctx, "get", resource, "failing-gadgets")
		if err != nil {
			t.Fatal(err)
		}
		if fields := strings.Fields(out); !strings.Contains(out, "FAILING") || strings.Contains(out, "MESSAGE") || !slices.Contains(fields, "4") {
			t.Errorf("kubectl get %s:\n%s", resource, out)
		}
		wide, err := env.Kubectl(ctx, "get", resource, "failing-gadgets", "-o", "wide")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(wide, "FAILING") || !strings.Contains(wide, "MESSAGE") || !strings.Contains(wide, "4 objects failed their last sync") {
			t.Errorf("kubectl get %s -o wide:\n%s", resource, wide)
		}
		t.Logf("kubectl get %s -o wide:\n%s", resource, wide)
	}

	// A burst of failing syncs, each with a new error, while the
	// controller objects are watched: their status is written at most once
	// per FailingStatusInterval (plus one for the write in progress), not
	// once per sync.
	w, err := ccs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=failing-gadgets"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start, before := time.Now(), calls.Load()
	poke := func(i int, value string) {
		t.Helper()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"poke":%q}}}`, value)
		if _, err := env.Dynamic.Resource(gadgets).Namespace(ns).Patch(ctx, fmt.Sprintf("g%d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ticker := time.NewTicker(100 * time.Millisecond)
	for round := range 100 {
		<-ticker.C
		poke(round%parents, fmt.Sprint(round))
	}
	ticker.Stop()
	elapsed := time.Since(start)
	syncs := calls.Load() - before
	// Every write up to now, up to the object's current version.
	last, err := ccs.Get(ctx, "failing-gadgets", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := 0
	for seen := false; !seen; {
		select {
		case ev := <-w.ResultChan():
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("watch event %v: %v", ev.Type, ev.Object)
			}
			if ev.Type == watch.Modified {
				writes++
			}
			seen = obj.GetResourceVersion() == last.GetResourceVersion()
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch did not reach version %s", last.GetResourceVersion())
		}
	}
	// g0's error changes with every call: its new error is shown.
	if writes == 0 {
		t.Errorf("no status write in %v while the first failing object's error changed %d times", elapsed, syncs)
	}
	if limit := int(elapsed/manager.FailingStatusInterval) + 2; writes > limit {
		t.Errorf("%d status writes of the CompositeController in %v (%d hook calls); want at most %d", writes, elapsed, syncs, limit)
	}
	t.Logf("%d status writes in %v for %d hook calls", writes, elapsed, syncs)

	// The hook recovers: once the parents are synced again, no object is
	// failing, within one FailingStatusInterval and a sync.
	broken.Store(false)
	for i := range parents {
		poke(i, "recovered")
	}
	for _, gvr := range []schema.GroupVersionResource{v1alpha1.CompositeControllerResource, v1alpha1.DecoratorControllerResource} {
		status := waitFailing(t, gvr, "failing-gadgets", 0, 10*time.Second+manager.FailingStatusInterval)
		ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
		synced := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionSynced)
		if synced.Reason != v1alpha1.ReasonAllSynced || strings.Contains(ready.Message, "failed") {
			t.Errorf("%s recovered: Synced %+v, Ready %+v", gvr.Resource, synced, ready)
		}
	}
	out, err := env.Kubectl(ctx, "get", "cc", "failing-gadgets")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(out), "0") {
		t.Errorf("kubectl get cc after recovery:\n%s", out)
	}
}

// TestUnknownResourceSuggestsTheServedOne: a controller naming a resource
// by its kind, singular or short name reports Ready=False UnknownResource
// with the served resource it probably means.
func TestUnknownResourceSuggestsTheServedOne(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	cases := map[string]map[string]any{
		"typo-kind":     {"apiVersion": "apps/v1", "resource": "Deployment"},
		"typo-singular": {"apiVersion": "apps/v1", "resource": "deployment"},
		"typo-short":    {"apiVersion": "apps/v1", "resource": "deploy"},
	}
	for name, parent := range cases {
		cc := compositeController(name, "http://127.0.0.1:1/sync")
		cc.Object["spec"].(map[string]any)["parentResource"] = parent
		if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ccs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	for name := range cases {
		c := waitReady(t, name, metav1.ConditionFalse, v1alpha1.ReasonUnknownResource)
		if !strings.Contains(c.Message, `did you mean "deployments"?`) {
			t.Errorf("%s: condition message %q suggests no deployments", name, c.Message)
		}
	}
	// A child resource too.
	cc := compositeController("typo-child", "http://127.0.0.1:1/sync")
	cc.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "secrets"}
	cc.Object["spec"].(map[string]any)["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmap"}}
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ccs.Delete(context.Background(), "typo-child", metav1.DeleteOptions{}) })
	c := waitReady(t, "typo-child", metav1.ConditionFalse, v1alpha1.ReasonUnknownResource)
	if !strings.Contains(c.Message, `spec.childResources[0]`) || !strings.Contains(c.Message, `did you mean "configmaps"?`) {
		t.Errorf("typo-child: condition message %q", c.Message)
	}
}
