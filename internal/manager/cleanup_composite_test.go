//go:build integration

package manager_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestDeletedCompositeControllerLeavesNoFinalizers deletes a running
// CompositeController whose parents carry its finalizer and whose finalize
// hook never says finalized: metactl's metactl.io/cleanup finalizer holds
// the CompositeController until every parent's finalizer is removed, then
// lets it go; the parents stay.
func TestDeletedCompositeControllerLeavesNoFinalizers(t *testing.T) {
	runManager(t, manager.Options{Config: env.Config, Workers: 2})
	ctx := context.Background()
	doodads := createCRD(t, "cleanup-composite.metactl.io", "doodads", "Doodad")
	h := newFinalizingHook(t, false)
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	if _, err := ccs.Create(ctx, finalizingController("CompositeController", "doodads", doodads, h.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const parentFinalizer = "metacontroller.io/compositecontroller-doodads"
	ns := env.CreateNamespace(t)
	for _, name := range []string{"d1", "d2"} {
		createObject(t, doodads, "Doodad", ns, name)
		waitFinalizers(t, doodads, ns, name, parentFinalizer)
	}
	cc, err := ccs.Get(ctx, "doodads", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cc.GetFinalizers(), manager.CleanupFinalizer) {
		t.Fatalf("the CompositeController lacks finalizer %s: %v", manager.CleanupFinalizer, cc.GetFinalizers())
	}

	if err := ccs.Delete(ctx, "doodads", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ccs, "doodads", 30*time.Second)
	for _, name := range []string{"d1", "d2"} {
		d, err := env.Dynamic.Resource(doodads).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("parent %s: %v", name, err)
		}
		if slices.Contains(d.GetFinalizers(), parentFinalizer) {
			t.Errorf("%s keeps finalizer %s of the deleted CompositeController", name, parentFinalizer)
		}
	}
}
