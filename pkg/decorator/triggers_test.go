//go:build integration

package decorator_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/decorator"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestSyncRecordOfADecoratedObject: a decorated object's syncs are
// recorded under its key: its change (object), the writes of its labels
// and of its attachment, and an attachment deleted by hand (dependent,
// naming it).
func TestSyncRecordOfADecoratedObject(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newHook(t, func(req *request) any {
		name := req.Object.GetName()
		return map[string]any{
			"labels": map[string]any{"decorated": "yes"},
			"attachments": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": name + "-secret"},
				"stringData": map[string]any{"of": name},
			}},
		}
	})
	shared := controllertest.Get(t, env)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "DecoratorController",
		"metadata":   map[string]any{"name": testName(t)},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": testName(t)}}}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
			"hooks":       syncHook(h),
		},
	}}
	c, err := decorator.New(ctx(t), obj, decorator.Options{Client: env.Dynamic, Objects: shared.Objects, Resources: shared.Resources, Informers: shared.Informers,
		Hooks: hookclient.NewClient(hookclient.Options{}), Recorder: shared.Recorder, Workers: 4,
		History: history.NewStore(history.StoreOptions{SyncsPerObject: 50})})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	createConfigMap(t, ns, "target", map[string]any{"decorate": testName(t)}, nil)
	key := "0|" + ns + "/target"
	find := func(what string, check func(*history.Sync) bool) *history.Sync {
		t.Helper()
		return controllertest.WaitForSync(t, c.History, key, what, check)
	}
	first := find("the sync of the new object", func(s *history.Sync) bool {
		return len(s.Triggers) > 0 && s.Triggers[0] == trigger.Trigger{Cause: trigger.CauseObject}
	})
	for _, w := range []history.Write{
		{Verb: "create", Target: "child", Object: "secrets/" + ns + "/target-secret"},
		{Verb: "patch", Target: "metadata", Object: "configmaps/" + ns + "/target"},
	} {
		if !slices.Contains(first.Writes, w) {
			t.Errorf("the first sync's writes %+v lack %+v", first.Writes, w)
		}
	}
	secret := waitFor(t, secretsGVR, ns, "target-secret", "attached", func(o *unstructured.Unstructured) bool { return o != nil })
	if err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Delete(ctx(t), "target-secret", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, secretsGVR, ns, "target-secret", "recreated", func(o *unstructured.Unstructured) bool { return o != nil && o.GetUID() != secret.GetUID() })
	find("the sync of the attachment's deletion", func(s *history.Sync) bool {
		return slices.Contains(s.Triggers, trigger.Trigger{Cause: trigger.CauseDependent, Object: "secrets/" + ns + "/target-secret"})
	})
	if n := controllertest.SyncsFor(testName(t), "success", trigger.CauseDependent); n < 1 {
		t.Errorf("metactl_syncs_total{trigger=dependent} = %v", n)
	}
}
