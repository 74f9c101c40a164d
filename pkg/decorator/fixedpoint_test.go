//go:build integration

package decorator_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
)

// clusterThingsGVR is a cluster-scoped custom resource with a status
// subresource (../composite/testdata/crds).
var clusterThingsGVR = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}

// labelStepHook moves the label step from none to one to two, and asks
// for an attachment only until it sees step two: it acts on the labels it
// wrote itself.
func labelStepHook(req *request) any {
	step := req.Object.GetLabels()["step"]
	next := map[string]string{"": "one", "one": "two", "two": "two"}[step]
	answer := map[string]any{"labels": map[string]any{"step": next}, "attachments": []any{}}
	if step != "two" {
		answer["attachments"] = []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": req.Object.GetName() + "-pending"}}}
	}
	return answer
}

// TestHookActingOnItsOwnLabelsConverges: the hook is called again with the
// labels it asked for, until it answers what it was given; its attachment,
// wanted only until step two, is gone; no outside event is needed.
func TestHookActingOnItsOwnLabelsConverges(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, labelStepHook)
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}, syncHook(h))
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)

	waitFor(t, configMapsGVR, ns, "target", "label step two", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetLabels()["step"] == "two"
	})
	waitFor(t, secretsGVR, ns, "target-pending", "deleted once step two was seen", func(o *unstructured.Unstructured) bool { return o == nil })
	if got := h.calls.Load(); got < 3 {
		t.Errorf("hook calls = %d, want at least 3 (one, two, two again)", got)
	}
	// In one sync: not by a retry after the hook failed to settle.
	if got := controllertest.Unsettled(testName(t)); got != 0 {
		t.Errorf("unsettled syncs = %v, want 0: the hook was not given the labels it asked for", got)
	}
}

// statusStepHook moves status.step from none to one to two.
func statusStepHook(req *request) any {
	step, _, _ := unstructured.NestedString(req.Object.Object, "status", "step")
	next := map[string]string{"": "one", "one": "two", "two": "two"}[step]
	return map[string]any{"status": map[string]any{"step": next}}
}

// statusStep returns status.step of obj ("" for none or a nil obj).
func statusStep(obj *unstructured.Unstructured) string {
	if obj == nil {
		return ""
	}
	step, _, _ := unstructured.NestedString(obj.Object, "status", "step")
	return step
}

// TestDecoratorStatusSettlesUnlessIgnored: a hook reading its own status
// gets there in one sync; with ignoreStatusChanges it is not called again
// for the status it wrote, as metacontroller does not re-sync on it.
func TestDecoratorStatusSettlesUnlessIgnored(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "watched", true: "ignored"}[ignore], func(t *testing.T) {
			h := newHook(t, statusStepHook)
			start(t, []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings", "ignoreStatusChanges": ignore,
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}}, nil, syncHook(h))
			name := testName(t)
			createClusterThing(t, name)
			want := map[bool]string{false: "two", true: "one"}[ignore]
			waitFor(t, clusterThingsGVR, "", name, "status step "+want, func(o *unstructured.Unstructured) bool { return statusStep(o) == want })
			if ignore {
				// A label change syncs; the hook must find the status it
				// wrote first, untouched by a sync in between.
				before := h.calls.Load()
				if _, err := env.Dynamic.Resource(clusterThingsGVR).Patch(ctx(t), name, types.MergePatchType, []byte(`{"metadata":{"labels":{"poke":"1"}}}`), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, clusterThingsGVR, "", name, "status step two after the label's sync", func(o *unstructured.Unstructured) bool { return statusStep(o) == "two" })
				if got := h.calls.Load() - before; got != 1 {
					t.Errorf("hook calls for the label change = %d, want 1", got)
				}
				return
			}
			testenv.Eventually(t, 10*time.Second, "three hook calls", func(context.Context) (bool, error) { return h.calls.Load() >= 3, nil })
		})
	}
}

// TestNullStatusLeavesStatusWrittenByOthers: a hook that answers only a
// label (status null) leaves the status alone, also when another writer
// changed it while the hook was being called.
func TestNullStatusLeavesStatusWrittenByOthers(t *testing.T) {
	name := testName(t)
	h := newHook(t, func(req *request) any {
		if req.Object.GetLabels()["labelled"] == "" {
			patch := []byte(`{"status":{"by":"other"}}`)
			if _, err := env.Dynamic.Resource(clusterThingsGVR).Patch(context.Background(), req.Object.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				t.Errorf("writing the status as another writer: %v", err)
			}
		}
		return map[string]any{"labels": map[string]any{"labelled": "yes"}, "status": nil}
	})
	// The object has a status before the controller starts: the one its
	// cache holds when the hook is called.
	createClusterThing(t, name)
	if _, err := env.Dynamic.Resource(clusterThingsGVR).Patch(ctx(t), name, types.MergePatchType, []byte(`{"status":{"by":"first"}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	start(t, []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}}, nil, syncHook(h))
	waitFor(t, clusterThingsGVR, "", name, "labelled", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetLabels()["labelled"] == "yes"
	})
	testenv.Eventually(t, 10*time.Second, "the labelling sync to end", func(context.Context) (bool, error) {
		return controllertest.Syncs(name, "success") >= 1, nil
	})
	if got := controllertest.Writes(name, "patch", "status"); got != 0 {
		t.Errorf("status writes = %v, want 0 for answers whose status is null", got)
	}
	got, err := env.Dynamic.Resource(clusterThingsGVR).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if by, _, _ := unstructured.NestedString(got.Object, "status", "by"); by != "other" {
		t.Errorf("status = %v, want the other writer's {by: other}", got.Object["status"])
	}
}

// createClusterThing creates the ClusterThing name, labelled decorate=name,
// and deletes it when the test ends.
func createClusterThing(t *testing.T, name string) {
	t.Helper()
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "ClusterThing",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"decorate": name}}}}
	if _, err := env.Dynamic.Resource(clusterThingsGVR).Create(ctx(t), thing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(clusterThingsGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
