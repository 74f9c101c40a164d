//go:build integration

package decorator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/decorator"
)

// TestForgedAttachmentInAnotherNamespace: a Secret of namespace B that
// carries this controller's attachment annotation and a controller
// reference to a decorated ConfigMap of namespace A is not an attachment
// of that ConfigMap: the hook is never given it, and metactl neither
// deletes nor updates it, sync after sync.
func TestForgedAttachmentInAnotherNamespace(t *testing.T) {
	nsA, nsB := env.CreateNamespace(t), env.CreateNamespace(t)
	var (
		mu       sync.Mutex
		requests []*request
	)
	h := newHook(t, func(req *request) any {
		mu.Lock()
		requests = append(requests, req)
		mu.Unlock()
		return map[string]any{"attachments": []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": req.Object.GetName() + "-secret"},
			"stringData": map[string]any{"of": req.Object.GetName()},
		}}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
		[]any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}},
		syncHook(h), func(obj *unstructured.Unstructured) {
			obj.Object["spec"].(map[string]any)["resyncPeriodSeconds"] = int64(1)
		})
	target := createConfigMap(t, nsA, "target", map[string]any{"decorate": testName(t)}, nil)
	waitFor(t, secretsGVR, nsA, "target-secret", "attached", func(o *unstructured.Unstructured) bool { return o != nil })

	forged := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "forged", "namespace": nsB,
			"annotations": map[string]any{decorator.AttachmentAnnotation: testName(t)},
			// A kind the garbage collector cannot resolve, so that it
			// leaves the object alone (it deletes an object whose
			// namespaced owner is not in its namespace) and only metactl
			// could touch it: metactl finds attachments by the owner's UID.
			"ownerReferences": []any{map[string]any{"apiVersion": "forged.metactl.io/v1", "kind": "Forged", "name": "target",
				"uid": string(target.GetUID()), "controller": true, "blockOwnerDeletion": true}}},
		"stringData": map[string]any{"planted": "yes"},
	}}
	planted, err := env.Dynamic.Resource(secretsGVR).Namespace(nsB).Create(ctx(t), forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := h.calls.Load() + 3
	testenv.Eventually(t, 30*time.Second, "more syncs", func(context.Context) (bool, error) { return h.calls.Load() >= want, nil })

	mu.Lock()
	defer mu.Unlock()
	for _, req := range requests {
		for key, a := range req.Attachments["Secret.v1"] {
			if a.GetNamespace() != nsA {
				t.Fatalf("the hook was given %s (namespace %s) as an attachment of an object of %s", key, a.GetNamespace(), nsA)
			}
		}
	}
	obj, err := env.Dynamic.Resource(secretsGVR).Namespace(nsB).Get(ctx(t), "forged", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the forged attachment: %v (deleted?)", err)
	}
	if obj.GetResourceVersion() != planted.GetResourceVersion() {
		t.Errorf("the forged attachment was written (resourceVersion %s, created %s)", obj.GetResourceVersion(), planted.GetResourceVersion())
	}
}

// TestClusterScopedAttachmentOfNamespacedObjectIsRefused: a hook that
// answers a cluster-scoped attachment for a namespaced object has its
// whole answer refused before any write (its namespaced attachment is not
// created either): the garbage collector would never remove such an
// attachment. A SyncError Event names the attachment and says why.
func TestClusterScopedAttachmentOfNamespacedObjectIsRefused(t *testing.T) {
	ns := env.CreateNamespace(t)
	name := testName(t)
	h := newHook(t, func(req *request) any {
		return map[string]any{"attachments": []any{
			map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "ok-secret"}},
			map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "ClusterThing", "metadata": map[string]any{"name": name}},
		}}
	})
	start(t, []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": name}}}},
		[]any{
			map[string]any{"apiVersion": "v1", "resource": "secrets"},
			map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "clusterthings"},
		},
		syncHook(h))
	createConfigMap(t, ns, "target", map[string]any{"decorate": name}, nil)

	msg := controllertest.EventMessage(t, env, ns, "target", "SyncError", "attachments[1] (ClusterThing "+name+")")
	for _, want := range []string{"clusterthings is cluster-scoped and cannot be owned by a namespaced object", "never remove"} {
		if !strings.Contains(msg, want) {
			t.Errorf("SyncError %q does not say %q", msg, want)
		}
	}
	if _, err := env.Dynamic.Resource(clusterThingsGVR).Get(ctx(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cluster-scoped attachment: %v, want NotFound", err)
	}
	if _, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx(t), "ok-secret", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the namespaced attachment of the refused answer: %v, want NotFound", err)
	}
}
