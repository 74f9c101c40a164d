//go:build integration

package decorator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/testenv"
)

// TestTakeOverDecoratedStatus: built-in objects that a DecoratorController
// decorated under metacontroller, which writes the hook's status into the
// object's own .status (pkg/controller/decorator/controller.go,
// syncParentObject: UpdateStatus through the status subresource, where the
// object's schema keeps only the fields it declares). At metactl's first
// syncs:
//   - an object whose .status already holds the answered status (a hook
//     answering what the object has) is not written at all;
//   - an object whose answered status its .status does not hold (a field
//     the schema drops, or no status at all: a ConfigMap) gets the
//     metactl.io/status annotation, in one write, and no more writes on
//     later syncs.
func TestTakeOverDecoratedStatus(t *testing.T) {
	ns := env.CreateNamespace(t)
	label := map[string]any{"decorate": testName(t)}

	// What metacontroller left: objects it decorated, no annotation.
	created := map[string]*unstructured.Unstructured{}
	for _, prefix := range []string{"echo-", "own-"} {
		obj, err := env.Dynamic.Resource(namespacesGVR).Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"generateName": prefix, "labels": label},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Dynamic.Resource(namespacesGVR).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
		})
		// The namespace controller sets status.phase on create.
		created[prefix] = waitFor(t, namespacesGVR, "", obj.GetName(), "phase set", func(o *unstructured.Unstructured) bool {
			phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
			return phase != ""
		})
	}
	created["configmap"] = createConfigMap(t, ns, "own-cm", label, nil)

	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	h := newHook(t, func(req *request) any {
		mu.Lock()
		calls[req.Object.GetName()]++
		mu.Unlock()
		if strings.HasPrefix(req.Object.GetName(), "echo-") {
			return map[string]any{"status": req.Object.Object["status"]}
		}
		return map[string]any{"status": map[string]any{"answered": req.Object.GetName()}}
	})
	c := start(t, []any{
		map[string]any{"apiVersion": "v1", "resource": "namespaces", "labelSelector": map[string]any{"matchLabels": label}},
		map[string]any{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": label}},
	}, nil, syncHook(h), func(obj *unstructured.Unstructured) {
		obj.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
	})
	// At least three syncs of each object, the first and resyncs after it:
	// a sync here calls the hook once, or twice when the answer differs
	// from the status the object was seen with.
	testenv.Eventually(t, 30*time.Second, "three syncs of every object", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, obj := range created {
			if calls[obj.GetName()] < 5 {
				return false, nil
			}
		}
		return true, nil
	})
	// Once written, the two objects whose .status lacks the answer are
	// not written again: their resourceVersions stay over three more syncs
	// of each. (A count of write requests would also count a conflict's
	// retry, which the API server's load may cause.)
	ownNS := waitFor(t, namespacesGVR, "", created["own-"].GetName(), "annotated", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetAnnotations()[engine.StatusAnnotation] != ""
	})
	ownCM := waitFor(t, configMapsGVR, ns, "own-cm", "annotated", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetAnnotations()[engine.StatusAnnotation] != ""
	})
	mu.Lock()
	before := map[string]int{}
	for _, obj := range created {
		before[obj.GetName()] = calls[obj.GetName()]
	}
	mu.Unlock()
	testenv.Eventually(t, 30*time.Second, "three more syncs of every object", func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for name, n := range before {
			if calls[name] < n+3 {
				return false, nil
			}
		}
		return true, nil
	})
	for _, o := range []*unstructured.Unstructured{ownNS, ownCM} {
		gvr := configMapsGVR
		if o.GetKind() == "Namespace" {
			gvr = namespacesGVR
		}
		now, err := env.Dynamic.Resource(gvr).Namespace(o.GetNamespace()).Get(ctx(t), o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.GetResourceVersion() != o.GetResourceVersion() {
			t.Errorf("%s %s was written again after its annotation: resourceVersion %s, was %s", o.GetKind(), o.GetName(), now.GetResourceVersion(), o.GetResourceVersion())
		}
	}
	if got := controllertest.Writes(c.Name(), "patch", "status"); got < 2 {
		t.Errorf("%v status writes, want at least the 2 objects whose .status lacks the answer", got)
	}

	echo, err := env.Dynamic.Resource(namespacesGVR).Get(ctx(t), created["echo-"].GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if echo.GetResourceVersion() != created["echo-"].GetResourceVersion() {
		t.Errorf("the namespace whose .status holds the answer was written: resourceVersion %s, was %s; annotations %v",
			echo.GetResourceVersion(), created["echo-"].GetResourceVersion(), echo.GetAnnotations())
	}
	own, err := env.Dynamic.Resource(namespacesGVR).Get(ctx(t), created["own-"].GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := own.GetAnnotations()[engine.StatusAnnotation], `{"answered":"`+own.GetName()+`"}`; got != want {
		t.Errorf("the namespace whose .status lacks the answer has %s %q, want %q", engine.StatusAnnotation, got, want)
	}
	cm, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), "own-cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cm.GetAnnotations()[engine.StatusAnnotation], `{"answered":"own-cm"}`; got != want {
		t.Errorf("the ConfigMap has %s %q, want %q", engine.StatusAnnotation, got, want)
	}
}
