//go:build integration

package decorator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

var (
	env           *testenv.Environment
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// TestMain starts the control plane, with the composite tests' parent CRDs
// for decorated custom resources that have a status.
func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{ExtraCRDPaths: []string{"../composite/testdata/crds"}}, &env)
}

// recorder records Events from component metactl-test.
var recorder record.EventRecorder

func ctx(t *testing.T) context.Context { return controllertest.Context(t) }

// request is what a test hook reads from a decorator sync request.
type request = controllertest.Request

type hook struct {
	*httptest.Server
	calls  atomic.Int64
	mu     sync.Mutex
	answer func(req *request) any
}

func newHook(t *testing.T, answer func(req *request) any) *hook {
	h := &hook{answer: answer}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &request{}
		if err := json.NewDecoder(r.Body).Decode(req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h.calls.Add(1)
		h.mu.Lock()
		answer := h.answer
		h.mu.Unlock()
		if s, ok := answer(req).(string); ok {
			_, _ = w.Write([]byte(s))
			return
		}
		_ = json.NewEncoder(w).Encode(answer(req))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) setAnswer(answer func(req *request) any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answer = answer
}

func testName(t *testing.T) string {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return strings.TrimRight(name, "-")
}

// start runs a DecoratorController with the given resources rules,
// attachments and hooks for the rest of the test; edit, if any, changes
// the object first.
func start(t *testing.T, resources []any, attachments []any, hooksSpec map[string]any, edit ...func(*unstructured.Unstructured)) *decorator.Controller {
	t.Helper()
	shared := controllertest.Get(t, env)
	recorder = shared.Recorder
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "DecoratorController",
		"metadata":   map[string]any{"name": testName(t)},
		"spec":       map[string]any{"resources": resources, "attachments": attachments, "hooks": hooksSpec},
	}}
	for _, e := range edit {
		e(obj)
	}
	c, err := decorator.New(ctx(t), obj, decorator.Options{Client: env.Dynamic, Objects: shared.Objects, Resources: shared.Resources, Informers: shared.Informers,
		Hooks: hookclient.NewClient(hookclient.Options{}), Recorder: shared.Recorder, Workers: 4})
	if err != nil {
		t.Fatalf("decorator.New: %v", err)
	}
	if err := c.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func syncHook(h *hook) map[string]any {
	return map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.URL + "/sync", "timeout": "2s"}}}
}

func createConfigMap(t *testing.T, ns, name string, labels, annotations map[string]any) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
	}}
	created, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func waitFor(t *testing.T, gvr schema.GroupVersionResource, ns, name, what string, check func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return controllertest.WaitFor(t, env, gvr, ns, name, what, check)
}

func TestDecorateByLabelWithAttachment(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		name := req.Object.GetName()
		return map[string]any{
			"labels":      map[string]any{"decorated": "yes"},
			"annotations": map[string]any{"note": "hello " + name},
			"attachments": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": name + "-secret"},
				"stringData": map[string]any{"of": name},
			}},
		}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}},
		syncHook(h))
	target := createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)
	createConfigMap(t, ns, "bystander", nil, nil)

	waitFor(t, configMapsGVR, ns, "target", "decorated", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetLabels()["decorated"] == "yes" && o.GetAnnotations()["note"] == "hello target"
	})
	secret := waitFor(t, secretsGVR, ns, "target-secret", "attached", func(o *unstructured.Unstructured) bool { return o != nil })
	ref := metav1.GetControllerOf(secret)
	if ref == nil || ref.UID != target.GetUID() || ref.Kind != "ConfigMap" {
		t.Errorf("attachment controller ref = %+v, want the decorated ConfigMap", ref)
	}
	if got := secret.GetAnnotations()[decorator.AttachmentAnnotation]; got != testName(t) {
		t.Errorf("attachment annotation = %q, want the controller's name", got)
	}
	if bystander, _ := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), "bystander", metav1.GetOptions{}); bystander.GetLabels()["decorated"] != "" {
		t.Error("an object outside the selector was decorated")
	}

	// A hand-deleted attachment comes back.
	if err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Delete(ctx(t), "target-secret", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, secretsGVR, ns, "target-secret", "recreated", func(o *unstructured.Unstructured) bool { return o != nil && o.GetUID() != secret.GetUID() })

	// Labels and annotations change, and null removes.
	h.setAnswer(func(req *request) any {
		return map[string]any{
			"labels":      map[string]any{"decorated": "again"},
			"annotations": map[string]any{"note": nil},
			"attachments": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": req.Object.GetName() + "-secret"},
				"stringData": map[string]any{"of": "changed"},
			}},
		}
	})
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", types.MergePatchType, []byte(`{"data":{"poke":"1"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "target", "relabelled, annotation removed, others kept", func(o *unstructured.Unstructured) bool {
		_, hasNote := o.GetAnnotations()["note"]
		return o.GetLabels()["decorated"] == "again" && !hasNote && o.GetLabels()["decorate"] == testName(t)
	})
	waitFor(t, secretsGVR, ns, "target-secret", "updated in place", func(o *unstructured.Unstructured) bool {
		if o == nil {
			return false
		}
		v, _, _ := unstructured.NestedString(o.Object, "data", "of")
		return v == "Y2hhbmdlZA==" // base64("changed")
	})
}

func TestDecorateClusterScopedByAnnotation(t *testing.T) {
	h := newHook(t, func(req *request) any {
		return map[string]any{"labels": map[string]any{"seen-by": "decorator"}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "namespaces",
		"annotationSelector": map[string]any{"matchAnnotations": map[string]any{"decorate": "free text, even with spaces " + testName(t)}}}},
		nil, syncHook(h))
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": "annotated-", "annotations": map[string]any{"decorate": "free text, even with spaces " + testName(t)}}}}
	created, err := env.Dynamic.Resource(namespacesGVR).Create(ctx(t), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(namespacesGVR).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	})
	waitFor(t, namespacesGVR, "", created.GetName(), "labelled", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetLabels()["seen-by"] == "decorator"
	})
}

func TestStatusNullLeavesItAndObjectReplaces(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any { return map[string]any{"status": nil, "labels": map[string]any{"step": "1"}} })
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "namespaces",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}}, nil, syncHook(h))
	patch := []byte(`{"metadata":{"labels":{"decorate":"` + testName(t) + `"}}}`)
	if _, err := env.Dynamic.Resource(namespacesGVR).Patch(ctx(t), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	before := waitFor(t, namespacesGVR, "", ns, "step 1", func(o *unstructured.Unstructured) bool { return o.GetLabels()["step"] == "1" })
	phase, _, _ := unstructured.NestedString(before.Object, "status", "phase")
	if phase != "Active" {
		t.Fatalf("a null status changed the namespace's status: %v", before.Object["status"])
	}
}

func TestFinalizeWhenTheObjectStopsMatching(t *testing.T) {
	ns := env.CreateNamespace(t)
	sync := newHook(t, func(req *request) any { return map[string]any{"labels": map[string]any{"synced": "yes"}} })
	var finalized atomic.Bool
	finalize := newHook(t, func(req *request) any {
		if !req.Finalizing {
			t.Error("finalize hook called with finalizing=false")
		}
		finalized.Store(true)
		return map[string]any{"labels": map[string]any{"synced": nil}, "finalized": true}
	})
	c := start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}}, nil,
		map[string]any{
			"sync":     syncHook(sync)["sync"],
			"finalize": map[string]any{"webhook": map[string]any{"url": finalize.URL + "/finalize"}},
		})
	_ = c
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)
	finalizerName := "metacontroller.io/decoratorcontroller-" + testName(t)
	waitFor(t, configMapsGVR, ns, "target", "finalizer and label", func(o *unstructured.Unstructured) bool {
		return o.GetLabels()["synced"] == "yes" && len(o.GetFinalizers()) == 1 && o.GetFinalizers()[0] == finalizerName
	})
	patch := []byte(`{"metadata":{"labels":{"decorate":null}}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, configMapsGVR, ns, "target", "finalized: label removed, finalizer gone", func(o *unstructured.Unstructured) bool {
		_, synced := o.GetLabels()["synced"]
		return !synced && len(o.GetFinalizers()) == 0
	})
	if !finalized.Load() {
		t.Error("the finalize hook was never called")
	}
}

func TestCleanupRemovesEveryFinalizer(t *testing.T) {
	ns := env.CreateNamespace(t)
	sync := newHook(t, func(req *request) any { return map[string]any{} })
	finalize := newHook(t, func(req *request) any { return map[string]any{"finalized": false} })
	c := start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}}, nil,
		map[string]any{"sync": syncHook(sync)["sync"], "finalize": map[string]any{"webhook": map[string]any{"url": finalize.URL}}})
	for _, name := range []string{"a", "b", "c"} {
		createConfigMap(t, ns, name, map[string]any{"decorate": testName(t)}, nil)
	}
	for _, name := range []string{"a", "b", "c"} {
		waitFor(t, configMapsGVR, ns, name, "finalizer", func(o *unstructured.Unstructured) bool { return len(o.GetFinalizers()) == 1 })
	}
	if err := c.Cleanup(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		o, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil || len(o.GetFinalizers()) != 0 {
			t.Errorf("%s keeps finalizers %v after Cleanup (err %v)", name, o.GetFinalizers(), err)
		}
	}
}

func TestInvalidAnswersChangeNothing(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		return map[string]any{"labels": map[string]any{"v": "good"}, "attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": req.Object.GetName() + "-secret"}}}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}, syncHook(h))
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)
	waitFor(t, configMapsGVR, ns, "target", "good", func(o *unstructured.Unstructured) bool { return o.GetLabels()["v"] == "good" })
	secret := waitFor(t, secretsGVR, ns, "target-secret", "attached", func(o *unstructured.Unstructured) bool { return o != nil })

	for _, tc := range []struct {
		name   string
		answer any
		reason string
	}{
		{"undeclared attachment", map[string]any{"labels": map[string]any{"v": "bad"}, "attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}}, "not a declared resource"},
		{"status not an object", `{"labels": {"v": "bad"}, "status": 5}`, "status"},
		{"attachment in another namespace", map[string]any{"labels": map[string]any{"v": "bad"}, "attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "x", "namespace": "default"}}}}, "namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.setAnswer(func(*request) any { return tc.answer })
			calls := h.calls.Load()
			if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), "target", types.MergePatchType,
				[]byte(`{"data":{"poke":"`+tc.name+`"}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 30*time.Second, "a retry after the failure", func(context.Context) (bool, error) {
				return h.calls.Load() >= calls+2, nil
			})
			testenv.Eventually(t, 30*time.Second, "a SyncError Event", func(ctx context.Context) (bool, error) {
				events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=target"})
				if err != nil {
					return false, err
				}
				for _, e := range events.Items {
					if e.Reason == "SyncError" && strings.Contains(e.Message, tc.reason) {
						return true, nil
					}
				}
				return false, nil
			})
			o, _ := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Get(ctx(t), "target", metav1.GetOptions{})
			if o.GetLabels()["v"] != "good" {
				t.Errorf("labels changed after an invalid answer: %v", o.GetLabels())
			}
			s, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx(t), "target-secret", metav1.GetOptions{})
			if err != nil || s.GetResourceVersion() != secret.GetResourceVersion() {
				t.Errorf("the attachment changed after an invalid answer (err %v)", err)
			}
		})
	}
}

// TestSecondCallFailingKeepsTheFirstAnswer answers the first call, which
// creates an attachment, and fails the second one (asked with that
// attachment): the first answer's labels still apply, and the failure is
// reported as a SyncError Event.
func TestSecondCallFailingKeepsTheFirstAnswer(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		for _, set := range req.Attachments {
			if len(set) > 0 {
				return "not JSON" // the second call
			}
		}
		return map[string]any{"labels": map[string]any{"answer": "first"}, "attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": req.Object.GetName() + "-secret"}}}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}, syncHook(h))
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)

	waitFor(t, secretsGVR, ns, "target-secret", "attached", func(o *unstructured.Unstructured) bool { return o != nil })
	waitFor(t, configMapsGVR, ns, "target", "labelled by the first answer", func(o *unstructured.Unstructured) bool {
		return o.GetLabels()["answer"] == "first"
	})
	testenv.Eventually(t, 30*time.Second, "a SyncError Event for the second call", func(ctx context.Context) (bool, error) {
		events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=target"})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == "SyncError" {
				return true, nil
			}
		}
		return false, nil
	})
}
