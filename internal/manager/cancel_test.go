//go:build integration

package manager_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// blockingHook never answers: each call waits until its request's context
// ends, which it reports on cancelled.
type blockingHook struct {
	*httptest.Server
	entered   chan struct{}
	cancelled chan time.Time
}

func newBlockingHook(t *testing.T) *blockingHook {
	h := &blockingHook{entered: make(chan struct{}, 100), cancelled: make(chan time.Time, 100)}
	quit := make(chan struct{})
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The server notices a closed connection once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		h.entered <- struct{}{}
		select {
		case <-r.Context().Done():
			h.cancelled <- time.Now()
		case <-quit:
		}
	}))
	// Close waits for the handlers: end the calls still blocked first.
	t.Cleanup(func() {
		close(quit)
		h.Close()
	})
	return h
}

// waitCall waits for the next call of the hook.
func (h *blockingHook) waitCall(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: the hook was not called within 60s", what)
	}
}

// waitCancelled waits for the hook to see a call's request cancelled,
// within bound of since.
func (h *blockingHook) waitCancelled(t *testing.T, since time.Time, bound time.Duration, what string) {
	t.Helper()
	select {
	case at := <-h.cancelled:
		t.Logf("%s: the hook saw its request cancelled after %v", what, at.Sub(since).Round(time.Millisecond))
	case <-time.After(bound):
		t.Fatalf("%s: the hook's request was not cancelled within %v", what, bound)
	}
}

// gadgetsCRD is the parent resource of these tests' controllers: their
// own, so that TestLifecycle still finds widgets unknown at first.
const gadgetsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.test.metactl.io
spec:
  group: test.metactl.io
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

var gadgetsGVR = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "gadgets"}

// kubectlApply applies one YAML document with kubectl; it stays after the
// test (the CRDs it applies are shared by the tests of this file).
func kubectlApply(t *testing.T, doc string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "object.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl(context.Background(), "apply", "-f", file); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// gadgetController is a CompositeController of gadgets calling url.
func gadgetController(name, url string) *unstructured.Unstructured {
	cc := compositeController(name, url)
	cc.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "gadgets"}
	return cc
}

func createGadget(t *testing.T, ns, name string) {
	t.Helper()
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metactl.io/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	testenv.Eventually(t, 30*time.Second, "creating gadget "+name, func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(gadgetsGVR).Namespace(ns).Create(ctx, gadget, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
}

// TestStoppingCancelsBlockedHooks runs controllers whose hook never
// answers (with a 4-minute timeout): a spec change, a deletion and the
// manager's shutdown each cancel the hook call in flight, which the hook
// server sees as its request's context ending, within the stop grace
// period; shutdown returns within it too.
func TestStoppingCancelsBlockedHooks(t *testing.T) {
	const grace = 5 * time.Second
	kubectlApply(t, gadgetsCRD)
	m, err := manager.New(manager.Options{Config: env.Config, Workers: 2, StopGracePeriod: grace})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	h := newBlockingHook(t)
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	blocking := func(name string) *unstructured.Unstructured {
		cc := gadgetController(name, h.URL)
		cc.Object["spec"].(map[string]any)["hooks"].(map[string]any)["sync"].(map[string]any)["webhook"].(map[string]any)["timeout"] = "4m"
		return cc
	}
	if _, err := ccs.Create(context.Background(), blocking("blocking"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ccs.Delete(context.Background(), "blocking", metav1.DeleteOptions{}) })
	ns := env.CreateNamespace(t)
	createGadget(t, ns, "blocked")
	h.waitCall(t, "created")

	// A spec change restarts the controller: the call in flight ends.
	began := time.Now()
	patch := []byte(`{"spec":{"hooks":{"sync":{"webhook":{"timeout":"3m"}}}}}`)
	if _, err := ccs.Patch(context.Background(), "blocking", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCancelled(t, began, grace, "spec change")
	h.waitCall(t, "restarted")

	// A deletion stops it: the call in flight ends.
	began = time.Now()
	if err := ccs.Delete(context.Background(), "blocking", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitCancelled(t, began, grace, "deletion")

	// Shutdown: Run returns within the grace period, the call ended.
	if _, err := ccs.Create(context.Background(), blocking("blocking-shutdown"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ccs.Delete(context.Background(), "blocking-shutdown", metav1.DeleteOptions{}) })
	h.waitCall(t, "created again")
	began = time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- nil // for the cleanup
		t.Logf("Run returned %v after the shutdown began", time.Since(began).Round(time.Millisecond))
	case <-time.After(grace + 2*time.Second):
		t.Fatalf("Run did not return within the grace period of %v", grace)
	}
	h.waitCancelled(t, began, grace, "shutdown")
}

// stuckCRD is a resource whose list never succeeds: its stored objects are
// v1, it is read as v2, and its conversion webhook cannot be reached. A
// cache of it never syncs.
const stuckCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: stucks.test.metactl.io
spec:
  group: test.metactl.io
  scope: Namespaced
  names: {plural: stucks, singular: stuck, kind: Stuck}
  conversion: %s
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestStuckStartDoesNotHoldOthers creates more controllers stuck in
// start-up (their child resource's cache never syncs) than the manager has
// workers, then another controller: it starts and syncs its parent at
// once, while the stuck ones still wait; past Options.StartTimeout each
// stuck one is Ready=False StartFailed.
func TestStuckStartDoesNotHoldOthers(t *testing.T) {
	ctx := context.Background()
	kubectlApply(t, gadgetsCRD)
	kubectlApply(t, fmt.Sprintf(stuckCRD, "{strategy: None}"))
	t.Cleanup(func() {
		_, _ = env.Kubectl(context.Background(), "delete", "crd", "stucks.test.metactl.io", "--wait=false")
	})
	ns := env.CreateNamespace(t)
	stuckV1 := schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "stucks"}
	stuckV2 := schema.GroupVersionResource{Group: "test.metactl.io", Version: "v2", Resource: "stucks"}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Stuck",
		"metadata": map[string]any{"name": "s", "namespace": ns}}}
	testenv.Eventually(t, 30*time.Second, "a stored v1 Stuck", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(stuckV1).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	kubectlApply(t, fmt.Sprintf(stuckCRD, "{strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {url: 'https://127.0.0.1:1/convert'}}}"))
	testenv.Eventually(t, 30*time.Second, "listing v2 Stucks fails", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(stuckV2).List(ctx, metav1.ListOptions{})
		return err != nil, nil
	})

	const startTimeout = 5 * time.Second
	runManager(t, manager.Options{Config: env.Config, Workers: 2, StartTimeout: startTimeout})
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	// More than the manager's 4 workers.
	for i := range 6 {
		name := fmt.Sprintf("stuck-%d", i)
		cc := gadgetController(name, "http://127.0.0.1:1/sync")
		cc.Object["spec"].(map[string]any)["childResources"] = []any{map[string]any{"apiVersion": "test.metactl.io/v2", "resource": "stucks"}}
		if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ccs.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	h := newHook(t, "healthy")
	if _, err := ccs.Create(ctx, gadgetController("healthy", h.URL), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ccs.Delete(context.Background(), "healthy", metav1.DeleteOptions{}) })
	createGadget(t, ns, "w")
	testenv.Eventually(t, 30*time.Second, "the healthy controller's child", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx, "w-healthy", metav1.GetOptions{})
		return err == nil, nil
	})
	waitReady(t, "healthy", metav1.ConditionTrue, v1alpha1.ReasonRunning)
	if c := readyCondition(t, "stuck-0"); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("stuck-0 is Ready although its cache cannot sync: %+v", c)
	}
	// Past the start timeout, each stuck controller says why it is not
	// running (the deadline allows the timeout and a few seconds to
	// report it).
	for i := range 6 {
		name := fmt.Sprintf("stuck-%d", i)
		testenv.Eventually(t, startTimeout+10*time.Second, name+" Ready=False StartFailed", func(context.Context) (bool, error) {
			c := readyCondition(t, name)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == manager.ReasonStartFailed, nil
		})
	}
}
