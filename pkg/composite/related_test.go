//go:build integration

package composite_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// relatedHook serves /customize with declare(parent) and /sync with a
// status listing the related ConfigMaps' data.value by key; it counts sync
// calls per parent, and records the related ConfigMaps' keys each path was
// given last. /finalize answers finalized.
type relatedHook struct {
	*httptest.Server
	mu      sync.Mutex
	syncs   map[string]int
	keys    map[string][]string
	declare func(parent *unstructured.Unstructured) any
}

func newRelatedHook(t *testing.T, declare func(parent *unstructured.Unstructured) any) *relatedHook {
	h := &relatedHook{syncs: map[string]int{}, keys: map[string][]string{}, declare: declare}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent  *unstructured.Unstructured                       `json:"parent"`
			Related map[string]map[string]*unstructured.Unstructured `json:"related"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.URL.Path == "/customize" {
			_ = json.NewEncoder(w).Encode(h.declare(req.Parent))
			return
		}
		var keys []string
		for key := range req.Related["ConfigMap.v1"] {
			keys = append(keys, key)
		}
		h.keys[r.URL.Path] = keys
		if r.URL.Path == "/finalize" {
			_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{}, "finalized": true})
			return
		}
		h.syncs[req.Parent.GetName()]++
		seen := map[string]any{}
		for key, obj := range req.Related["ConfigMap.v1"] {
			v, _, _ := unstructured.NestedString(obj.Object, "data", "value")
			seen[key] = v
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"related": seen}, "children": []any{}})
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *relatedHook) syncsOf(parent string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.syncs[parent]
}

func relatedController(t *testing.T, h *relatedHook, parent schema.GroupVersionResource, version string) *unstructured.Unstructured {
	return compositeController(t, &testHook{server: h.Server}, parent, func(spec map[string]any) {
		spec["childResources"] = []any{}
		spec["hooks"] = map[string]any{
			"sync":      map[string]any{"version": version, "webhook": map[string]any{"url": h.URL + "/sync"}},
			"customize": map[string]any{"version": version, "webhook": map[string]any{"url": h.URL + "/customize"}},
		}
	})
}

func createValueConfigMap(t *testing.T, ns, name, value string, labels map[string]any) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}, "data": map[string]any{"value": value}}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setValue(t *testing.T, ns, name, value string) {
	t.Helper()
	patch := []byte(`{"data":{"value":"` + value + `"}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(ctx(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func relatedStatus(o *unstructured.Unstructured) map[string]any {
	m, _, _ := unstructured.NestedMap(o.Object, "status", "related")
	return m
}

func TestRelatedByNamesResyncsOnlyTheParentsThatSelectIt(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		source, _, _ := unstructured.NestedString(parent.Object, "spec", "source")
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{source}}}}
	})
	startController(t, relatedController(t, h, thingsGVR, "v1"))
	createValueConfigMap(t, ns, "source-a", "a1", nil)
	createValueConfigMap(t, ns, "source-b", "b1", nil)
	newThing(t, thingsGVR, ns, "pa", map[string]any{"source": "source-a"})
	newThing(t, thingsGVR, ns, "pb", map[string]any{"source": "source-b"})
	waitFor(t, thingsGVR, ns, "pa", "sees source-a", func(o *unstructured.Unstructured) bool { return relatedStatus(o)["source-a"] == "a1" })
	waitFor(t, thingsGVR, ns, "pb", "sees source-b", func(o *unstructured.Unstructured) bool { return relatedStatus(o)["source-b"] == "b1" })

	// pb may be synced once more for its start-up (the related informer's
	// first list can arrive after pb's first sync); count from when its
	// syncs have stopped for a second.
	before := h.syncsOf("pb")
	lastChange := time.Now()
	testenv.Eventually(t, 30*time.Second, "pb's start-up syncs to end", func(context.Context) (bool, error) {
		if n := h.syncsOf("pb"); n != before {
			before, lastChange = n, time.Now()
		}
		return time.Since(lastChange) > time.Second, nil
	})
	setValue(t, ns, "source-a", "a2")
	waitFor(t, thingsGVR, ns, "pa", "sees the change", func(o *unstructured.Unstructured) bool { return relatedStatus(o)["source-a"] == "a2" })
	// pb, which did not declare source-a, is not synced for it: change
	// source-b, wait for pb to see that, and count exactly one more sync:
	// two hook calls, the second given the status the first asked for (a
	// sync for source-a would add a third).
	setValue(t, ns, "source-b", "b2")
	waitFor(t, thingsGVR, ns, "pb", "sees its own change", func(o *unstructured.Unstructured) bool { return relatedStatus(o)["source-b"] == "b2" })
	if got := h.syncsOf("pb") - before; got != 2 {
		t.Errorf("pb's hook called %d times for one change of its own source and one of another's, want 2", got)
	}
}

func TestRelatedByLabelSelector(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"feeds": parent.GetName()}}}}}
	})
	startController(t, relatedController(t, h, thingsGVR, "v1"))
	newThing(t, thingsGVR, ns, "p1", nil)
	createValueConfigMap(t, ns, "feed-1", "x", map[string]any{"feeds": "p1"})
	createValueConfigMap(t, ns, "other", "y", map[string]any{"feeds": "p2"})
	waitFor(t, thingsGVR, ns, "p1", "sees feed-1 only", func(o *unstructured.Unstructured) bool {
		r := relatedStatus(o)
		return r["feed-1"] == "x" && len(r) == 1
	})
	createValueConfigMap(t, ns, "feed-2", "z", map[string]any{"feeds": "p1"})
	waitFor(t, thingsGVR, ns, "p1", "sees the new feed", func(o *unstructured.Unstructured) bool { return relatedStatus(o)["feed-2"] == "z" })
}

func TestRelatedByNamespaceSelectorUnderV2(t *testing.T) {
	selected, other := env.CreateNamespace(t), env.CreateNamespace(t)
	label := testLabel(t)
	patch := []byte(`{"metadata":{"labels":{"related-test":"` + label + `"}}}`)
	if _, err := env.Kube.CoreV1().Namespaces().Patch(ctx(t), selected, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"related-test": label}},
			"labelSelector":     map[string]any{"matchLabels": map[string]any{"kind": "source"}}}}}
	})
	// As a controller acting as a ServiceAccount allowed every read:
	// without one, a namespaced parent's rules stay in its namespace
	// (TestRelatedOutsideTheParentsNamespaceNeedsAnAccount).
	startController(t, relatedController(t, h, thingsGVR, "v2"), func(o *composite.Options) {
		o.MayRead = func(context.Context, *discovery.Resource, string) error { return nil }
	})
	createValueConfigMap(t, selected, "src", "in", map[string]any{"kind": "source"})
	createValueConfigMap(t, other, "src", "out", map[string]any{"kind": "source"})
	newThing(t, thingsGVR, other, "p1", nil)
	waitFor(t, thingsGVR, other, "p1", "sees the selected namespace's source, keyed namespace/name", func(o *unstructured.Unstructured) bool {
		r := relatedStatus(o)
		return r[selected+"/src"] == "in" && len(r) == 1
	})
}

// TestRelatedOutsideTheParentsNamespaceNeedsAnAccount: a controller that
// reads as metactl (no ServiceAccount) and whose v2 customize rule asks,
// for a namespaced parent, for a Secret of another namespace (one of
// kube-system's, here a namespace of the test's) fails the parent's sync
// saying why and what to do; its sync hook is never called, so the Secret
// reaches no hook. A rule in the parent's namespace is served.
func TestRelatedOutsideTheParentsNamespaceNeedsAnAccount(t *testing.T) {
	ns, system := env.CreateNamespace(t), env.CreateNamespace(t)
	if _, err := env.Kube.CoreV1().Secrets(system).Create(ctx(t), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: system}, StringData: map[string]string{"token": "not-yours"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		namespace := system
		if parent.GetName() == "own" {
			namespace = parent.GetNamespace()
		}
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "namespace": namespace, "names": []any{"token"}}}}
	})
	startController(t, relatedController(t, h, thingsGVR, "v2"))
	newThing(t, thingsGVR, ns, "thief", nil)
	waitForEvent(t, ns, "thief", "SyncError", "the rule reads secrets in namespace "+system+", outside the parent's namespace "+ns)
	if n := h.syncsOf("thief"); n != 0 {
		t.Errorf("the sync hook was called %d times with another namespace's objects", n)
	}
	newThing(t, thingsGVR, ns, "own", nil)
	testenv.Eventually(t, 30*time.Second, "a sync of the parent whose rule reads its own namespace", func(context.Context) (bool, error) {
		return h.syncsOf("own") > 0, nil
	})
}

func TestInvalidCustomizeAnswerChangesNothing(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"names": []any{"x"}, "labelSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}}
	})
	startController(t, relatedController(t, h, thingsGVR, "v1"))
	newThing(t, thingsGVR, ns, "p1", nil)
	waitForEvent(t, ns, "p1", "SyncError", "names cannot be combined")
	if n := h.syncsOf("p1"); n != 0 {
		t.Errorf("the sync hook was called %d times after an invalid customize answer", n)
	}
	p, _ := get(t, thingsGVR, ns, "p1")
	if p.Object["status"] != nil {
		t.Errorf("status written after an invalid customize answer: %v", p.Object["status"])
	}
}

// TestRelatedKeyedForTheHookCalled: related objects are keyed by the
// version of the hook that receives them: a v2 finalize hook gets
// "namespace/name" keys although the sync hook is v1, as its children are.
func TestRelatedKeyedForTheHookCalled(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newRelatedHook(t, func(*unstructured.Unstructured) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"source"}}}}
	})
	cc := relatedController(t, h, thingsGVR, "v1")
	cc.Object["spec"].(map[string]any)["hooks"].(map[string]any)["finalize"] = map[string]any{"version": "v2", "webhook": map[string]any{"url": h.URL + "/finalize"}}
	startController(t, cc)
	createValueConfigMap(t, ns, "source", "x", nil)
	newThing(t, thingsGVR, ns, "p1", nil)
	keysOf := func(path string) []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.keys[path]
	}
	testenv.Eventually(t, 10*time.Second, "a sync call with the related ConfigMap", func(context.Context) (bool, error) { return len(keysOf("/sync")) > 0, nil })
	if err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Delete(ctx(t), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "a finalize call with the related ConfigMap", func(context.Context) (bool, error) { return len(keysOf("/finalize")) > 0, nil })
	if got := keysOf("/sync"); len(got) != 1 || got[0] != "source" {
		t.Errorf("the v1 sync hook got related keys %q, want [source]", got)
	}
	if got := keysOf("/finalize"); len(got) != 1 || got[0] != ns+"/source" {
		t.Errorf("the v2 finalize hook got related keys %q, want [%s/source]", got, ns)
	}
}
