//go:build integration

package composite_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
)

// TestSlowHookDoesNotSerialise: while the hook call of one parent hangs,
// the controller's other parents are synced and converge; the hung parent
// converges once its hook answers.
func TestSlowHookDoesNotSerialise(t *testing.T) {
	ns := env.CreateNamespace(t)
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	hook := newTestHook(t, nil)
	hook.setHandler(func(w http.ResponseWriter, r *http.Request, req *syncRequest) {
		if req.Parent.GetName() == "slow" {
			select {
			case blocked <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"children":[],"status":{"synced":%q}}`, req.Parent.GetName())
	})
	releaseOnce := func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}
	startController(t, compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		// Long enough for the hung call to outlast the test's wait for
		// the others.
		spec["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["timeout"] = "60s"
	}), func(o *composite.Options) { o.Workers = 4 })
	t.Cleanup(releaseOnce) // before the controller stops: it waits for its syncs

	newThing(t, thingsGVR, ns, "slow", nil)
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow parent's hook was not called")
	}
	const others = 12 // more than the workers: each worker is free again after a sync
	for i := range others {
		newThing(t, thingsGVR, ns, fmt.Sprintf("p%d", i), nil)
	}
	testenv.Eventually(t, 20*time.Second, "every other parent's status while the slow hook hangs", func(ctx context.Context) (bool, error) {
		list, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, p := range list.Items {
			if p.GetName() != "slow" && statusField(&p, "synced") == p.GetName() {
				done++
			}
		}
		return done == others, nil
	})
	releaseOnce()
	waitFor(t, thingsGVR, ns, "slow", "status once its hook answers", func(o *unstructured.Unstructured) bool {
		return o != nil && statusField(o, "synced") == "slow"
	})
}
