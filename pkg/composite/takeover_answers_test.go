//go:build integration

package composite_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// TestTakeOverAnswerForms: children whose hook answer sets its own
// controller reference, keeps null fields or repeats a list-map key, left
// by metacontroller as it leaves them once converged, are taken over by
// metactl with exactly the writes docs/compatibility.md ("Switching",
// step 5) lists: none, except a null the API server stores as something
// else (a ConfigMap's "") and a repeated list-map key, each written once.
//
// How metacontroller leaves them (pkg/controller/common/manage_children.go,
// updateChildrenWithDynamicApply and ApplyUpdate; pkg/dynamic/apply/apply.go,
// SetLastApplied and Merge):
//   - It creates a child with the last-applied annotation holding the
//     hook's child as json.Marshal encodes it, nulls included, then appends
//     its controller reference to the hook's owner references. A hook's own
//     controller reference so makes two, which the API server refuses: such
//     a child exists only if it was created from an answer without one and
//     the hook added it later. metacontroller's update then merges owner
//     references as a list keyed by name: one reference, the hook's fields
//     over metacontroller's (blockOwnerDeletion stays true unless the hook
//     says otherwise).
//   - On update it merges the answer into the object and writes nulls as
//     null; it writes when the result differs (reflect.DeepEqual). A null
//     the API server keeps (a field under x-kubernetes-preserve-unknown-fields)
//     is then left as it is; a null it stores as "" (a ConfigMap's data) is
//     sent again on every sync, a no-op for the server.
//   - A list whose elements share a merge key (name) is merged as a map:
//     the elements of one key collapse to the answer's last, written once
//     per observed element, so the object holds the last element repeated.
func TestTakeOverAnswerForms(t *testing.T) {
	shared(t)
	ns := env.CreateNamespace(t)

	type answerFn = func(parent *unstructured.Unstructured) []map[string]any
	cases := map[string]answerFn{
		"own-ref": func(p *unstructured.Unstructured) []map[string]any {
			cm := configMapChild(p, p.GetName()+"-cm", map[string]any{"k": "v"})
			cm["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
				"apiVersion": p.GetAPIVersion(), "kind": p.GetKind(), "name": p.GetName(), "uid": string(p.GetUID()), "controller": true,
			}}
			return []map[string]any{cm}
		},
		"own-ref-nonblocking": func(p *unstructured.Unstructured) []map[string]any {
			cm := configMapChild(p, p.GetName()+"-cm", map[string]any{"k": "v"})
			cm["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
				"apiVersion": p.GetAPIVersion(), "kind": p.GetKind(), "name": p.GetName(), "uid": string(p.GetUID()),
				"controller": true, "blockOwnerDeletion": false,
			}}
			return []map[string]any{cm}
		},
		"null-kept": func(p *unstructured.Unstructured) []map[string]any {
			return []map[string]any{childThing(p, map[string]any{"a": "x", "gone": nil, "nested": map[string]any{"b": nil, "c": int64(1)}})}
		},
		"null-configmap": func(p *unstructured.Unstructured) []map[string]any {
			return []map[string]any{configMapChild(p, p.GetName()+"-cm", map[string]any{"k": "v", "empty": nil})}
		},
		"repeated-key": func(p *unstructured.Unstructured) []map[string]any {
			return []map[string]any{childThing(p, map[string]any{"items": []any{
				map[string]any{"name": "a", "v": int64(1)}, map[string]any{"name": "a", "v": int64(2)},
			}})}
		},
	}
	// The writes metactl makes at the take-over, by child.
	wantWrites := map[string]int{"null-configmap": 1, "repeated-key": 1}

	hook := newTestHook(t, func(req *syncRequest) any {
		return map[string]any{"status": map[string]any{"ok": true}, "children": cases[req.Parent.GetName()](req.Parent)}
	})
	cc := compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{
			map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}},
			map[string]any{"apiVersion": childThingsGVR.GroupVersion().String(), "resource": "childthings", "updateStrategy": map[string]any{"method": "InPlace"}},
		}
		// The parents carry metacontroller's finalizer, which metactl
		// keeps only for a controller with a finalize hook.
		spec["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": hook.server.URL + "/finalize"}}
		spec["parentResource"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{"test": ns}}
	})
	finalizerName := "metacontroller.io/compositecontroller-" + cc.GetName()

	children := map[string]*unstructured.Unstructured{} // by parent
	for name, answer := range cases {
		parent := writeParentAsMetacontroller(t, ns, name, finalizerName, func(*unstructured.Unstructured) (map[string]any, []map[string]any) {
			return map[string]any{"ok": true}, nil
		})
		t.Cleanup(func() {
			_, _ = env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(context.Background(), name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		children[name] = leaveAsMetacontroller(t, parent, answer(parent)[0])
	}

	before := map[string]string{}
	for name, child := range children {
		before[name] = child.GetResourceVersion()
	}

	counter := &requestCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.wrap)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := objectclient.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := startController(t, cc, func(o *composite.Options) { o.Client, o.Objects = client, objs })
	testenv.Eventually(t, 30*time.Second, "the hook asked about every parent", func(context.Context) (bool, error) {
		asked := map[string]bool{}
		for _, req := range hook.requestsSnapshot() {
			asked[req.Parent.GetName()] = true
		}
		return len(asked) == len(cases), nil
	})
	c.Stop()

	sent := counter.writes()
	for name, child := range children {
		n := 0
		for _, w := range sent {
			if strings.HasSuffix(w, "/"+child.GetName()) {
				n++
			}
		}
		if n != wantWrites[name] {
			t.Errorf("%s: metactl wrote its child %d times taking over, want %d (writes: %v)", name, n, wantWrites[name], sent)
		}
		got, err := env.Dynamic.Resource(gvrOf(child)).Namespace(ns).Get(ctx(t), child.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if changed := got.GetResourceVersion() != before[name]; changed != (wantWrites[name] > 0) {
			t.Errorf("%s: resourceVersion %s, was %s before the take-over", name, got.GetResourceVersion(), before[name])
		}
	}
	for _, w := range sent {
		if !strings.Contains(w, "/configmaps/") && !strings.Contains(w, "/childthings/") {
			t.Errorf("metactl wrote %s taking over, want no write but the children's listed", w)
		}
	}
}

// childThing is a desired ChildThing child of parent with spec.
func childThing(parent *unstructured.Unstructured, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": childThingsGVR.GroupVersion().String(),
		"kind":       "ChildThing",
		"metadata":   map[string]any{"name": parent.GetName() + "-ct", "labels": map[string]any{"parent": parent.GetName()}},
		"spec":       spec,
	}
}

func gvrOf(obj *unstructured.Unstructured) schema.GroupVersionResource {
	if obj.GetKind() == "ChildThing" {
		return childThingsGVR
	}
	return configMapsGVR
}

// leaveAsMetacontroller makes hookChild a child of parent as metacontroller
// leaves it once converged (see TestTakeOverAnswerForms) and returns it as
// the API server holds it.
func leaveAsMetacontroller(t *testing.T, parent *unstructured.Unstructured, hookChild map[string]any) *unstructured.Unstructured {
	t.Helper()
	client := env.Dynamic.Resource(gvrOf(&unstructured.Unstructured{Object: hookChild})).Namespace(parent.GetNamespace())
	obj := (&unstructured.Unstructured{Object: hookChild}).DeepCopy()
	obj.SetNamespace(parent.GetNamespace())
	recorded, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	obj.SetAnnotations(map[string]string{"metacontroller.k8s.io/last-applied-configuration": string(recorded)})
	controller, block := true, true
	mcRef := metav1.OwnerReference{
		APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(), UID: parent.GetUID(),
		Controller: &controller, BlockOwnerDeletion: &block,
	}
	hookRefs := obj.GetOwnerReferences()
	obj.SetOwnerReferences(append(hookRefs, mcRef))
	created, err := client.Create(ctx(t), obj, metav1.CreateOptions{})
	if len(hookRefs) > 0 {
		// Two controller references: refused, as metacontroller's create
		// is. It was created from an answer without the hook's reference,
		// and the hook's fields were merged into metacontroller's.
		if err == nil || !strings.Contains(err.Error(), "Only one reference can have Controller set to true") {
			t.Fatalf("creating %s as metacontroller does: %v, want refused for two controller references", obj.GetName(), err)
		}
		merged := map[string]any{}
		b, _ := json.Marshal(mcRef)
		_ = json.Unmarshal(b, &merged)
		for _, r := range hookChild["metadata"].(map[string]any)["ownerReferences"].([]any) {
			for k, v := range r.(map[string]any) {
				merged[k] = v
			}
		}
		_ = unstructured.SetNestedSlice(obj.Object, []any{merged}, "metadata", "ownerReferences")
		if created, err = client.Create(ctx(t), obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	if err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
	// metacontroller's next sync: the elements of a repeated merge key
	// collapse to the answer's last, once per observed element.
	if items, ok, _ := unstructured.NestedSlice(created.Object, "spec", "items"); ok && len(items) == 2 {
		_ = unstructured.SetNestedSlice(created.Object, []any{items[1], items[1]}, "spec", "items")
		if created, err = client.Update(ctx(t), created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating %s as metacontroller does: %v", obj.GetName(), err)
		}
	}
	return created
}
