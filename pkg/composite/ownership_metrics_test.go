//go:build integration

package composite_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
)

// TestAdoptionsAndReleasesAreCounted: adopting an orphan and releasing a
// child that stopped matching are writes, counted as documented in
// metactl_object_writes_total{verb="patch",target="ownership"}.
func TestAdoptionsAndReleasesAreCounted(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc)
	ownershipWrites := func() float64 {
		return controllertest.Writes(cc.GetName(), "patch", "ownership")
	}
	if n := ownershipWrites(); n != 0 {
		t.Fatalf("%v ownership writes before any", n)
	}

	orphan := &unstructured.Unstructured{Object: configMapChild(&unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p1"}}}, "p1-cm", map[string]any{"value": "old"})}
	orphan.SetNamespace(ns)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	parent := newThing(t, thingsGVR, ns, "p1", map[string]any{"value": "new"})
	adopted := waitFor(t, configMapsGVR, ns, "p1-cm", "adopted", func(o *unstructured.Unstructured) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.UID == parent.GetUID()
	})
	// The counter moves once the write's answer is back, which can be a
	// moment after the API server shows its result.
	testenv.Eventually(t, 5*time.Second, "an adoption counted as an ownership write", func(context.Context) (bool, error) { return ownershipWrites() >= 1, nil })
	// The sync that adopted goes on (the update of the child's data, the
	// hook called again with it): a hook answering no children before it
	// ends would have the child deleted, not released.
	testenv.Eventually(t, 5*time.Second, "the adopting sync to end", func(context.Context) (bool, error) {
		return controllertest.Syncs(cc.GetName(), "success") >= 1, nil
	})

	hook.answer(func(req *syncRequest) any { return map[string]any{"children": []any{}} })
	// Relabel the child as it is now: the adopting sync also updated its
	// data after the adoption was seen.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), adopted.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		current.SetLabels(map[string]string{"parent": "someone-else"})
		_, err = env.Dynamic.Resource(configMapsGVR).Namespace(ns).Update(ctx(t), current, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "p1-cm", "released", func(o *unstructured.Unstructured) bool {
		return o != nil && metav1.GetControllerOf(o) == nil
	})
	testenv.Eventually(t, 5*time.Second, "an adoption and a release counted as 2 ownership writes", func(context.Context) (bool, error) { return ownershipWrites() >= 2, nil })
}
