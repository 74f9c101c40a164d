//go:build integration

package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// stallingHook is the attacker's hook: it announces a large answer (its
// Content-Length: 14 MiB for a parent named big-*, else 64 KiB), sends
// its first byte and stalls until its request ends, which it reports on
// ended with how long the call lasted.
type stallingHook struct {
	*httptest.Server
	ended chan time.Duration
}

func newStallingHook(t *testing.T) *stallingHook {
	h := &stallingHook{ended: make(chan time.Duration, 1000)}
	quit := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		size := 64 << 10
		if strings.HasPrefix(req.Parent.GetName(), "big-") {
			size = 14 << 20
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = io.WriteString(w, "{")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			select {
			case h.ended <- time.Since(began):
			default:
			}
		case <-quit:
		}
	}))
	t.Cleanup(func() {
		close(quit)
		h.Close()
	})
	return h
}

// sprocketsCRD is the parent resource of the well-behaved controller of
// TestStallingHookCannotStarveAnotherController (widgets must stay
// unknown until TestLifecycle applies them).
const sprocketsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sprockets.test.metactl.io
spec:
  group: test.metactl.io
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

var sprocketsGVR = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "sprockets"}

// TestStallingHookCannotStarveAnotherController is the attack of issue 32
// through the whole process: a manager with default budgets runs two
// controllers; the attacker's hook (timeout 5 minutes, the longest
// allowed) announces two answers of 14 MiB and 70 of 64 KiB and stalls,
// holding all of the shared budget of hook answers. The other
// controller's parents still get their children within 3 seconds each
// (about 110 ms measured: their answers, about 150 bytes, are read from
// the controller's own floor at once; the bound leaves room for a loaded
// machine, and is below the 5s grace after which, without floors, the
// attacker's room would be given back to a waiting answer), and the
// attacker's stalled calls end within the body's deadline (5s grace plus
// 64 KiB at 1 MiB/s), not at the hook's timeout.
//
// Each controller has at most loop.DefaultActive() syncs in flight until
// syncs come back from their hook: 8 per CPU, at least 32. With 32 (up to
// 4 CPUs) one controller alone cannot hold the 66 calls the attack needs;
// the test sets GOMAXPROCS to 9, as a node with 9 CPUs has, for 72.
func TestStallingHookCannotStarveAnotherController(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(9))
	kubectlApply(t, gadgetsCRD)
	kubectlApply(t, sprocketsCRD)
	runManager(t, manager.Options{Config: env.Config})
	ctx := context.Background()
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)

	attacker, good := newStallingHook(t), newHook(t, "good")
	stalling := gadgetController("stall-attacker", attacker.URL)
	stalling.Object["spec"].(map[string]any)["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["timeout"] = "5m"
	wellBehaved := compositeController("stall-good", good.URL)
	wellBehaved.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "sprockets"}
	for _, cc := range []*unstructured.Unstructured{stalling, wellBehaved} {
		if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ccs.Delete(context.Background(), cc.GetName(), metav1.DeleteOptions{}) })
	}
	waitReady(t, "stall-attacker", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	waitReady(t, "stall-good", metav1.ConditionTrue, v1alpha1.ReasonRunning)

	ns := env.CreateNamespace(t)
	held := func() float64 {
		n, _ := gaugeValue(t, "metactl_hook_response_bytes_in_flight", nil)
		return n
	}
	// The large answers first: smaller ones would take room in the main
	// part first.
	createGadget(t, ns, "big-0")
	createGadget(t, ns, "big-1")
	testenv.Eventually(t, 60*time.Second, "the attacker holds the main part of the shared budget", func(context.Context) (bool, error) {
		return held() >= 28<<20, nil
	})
	var created sync.WaitGroup
	for i := range 70 {
		created.Go(func() { createGadget(t, ns, fmt.Sprintf("small-%d", i)) })
	}
	created.Wait()
	testenv.Eventually(t, 60*time.Second, "the attacker holds the whole shared budget of hook answers", func(context.Context) (bool, error) {
		return held() >= float64(hookclient.DefaultResponseBudgetBytes), nil
	})

	const bound = 3 * time.Second
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		start := time.Now()
		sprocket := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.metactl.io/v1", "kind": "Sprocket",
			"metadata": map[string]any{"name": name, "namespace": ns},
		}}
		if _, err := env.Dynamic.Resource(sprocketsGVR).Namespace(ns).Create(ctx, sprocket, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, bound, "the good controller's child "+name+"-good", func(ctx context.Context) (bool, error) {
			_, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx, name+"-good", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
		t.Logf("%s's child after %v", name, time.Since(start).Round(time.Millisecond))
	}

	// The attacker's stalled calls end at their body's deadline, not at
	// the hook's timeout of 5 minutes.
	deadline := hookclient.DefaultResponseGrace + time.Second*(64<<10)/time.Duration(hookclient.DefaultMinResponseBytesPerSecond)
	select {
	case d := <-attacker.ended:
		t.Logf("a stalled call of the attacker ended after %v", d.Round(time.Millisecond))
		if d < deadline {
			t.Errorf("a stalled call ended after %v, before its body's deadline of %v", d, deadline)
		}
	case <-time.After(deadline + 10*time.Second):
		t.Fatalf("no stalled call of the attacker ended within %v", deadline+10*time.Second)
	}
}
