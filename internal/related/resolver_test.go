//go:build integration

package related_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestCustomizeAnswerIsKeptPerGeneration: the customize hook is called
// once per parent generation: not again for a resync of the same
// generation, again for a new generation or a new parent of the same name.
func TestCustomizeAnswerIsKeptPerGeneration(t *testing.T) {
	own := env.CreateNamespace(t)
	labels := map[string]any{"related-test": label(t)}
	createConfigMap(t, own, "a", labels)
	f := newFixture(t, ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": labels}})
	parent := parentIn(own)
	for range 3 {
		want(t, "same generation", f.relatedKeys(t, parent), own+"/a")
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("customize called %d times for one generation, want 1", n)
	}
	parent.SetGeneration(2)
	f.relatedKeys(t, parent)
	if n := f.calls.Load(); n != 2 {
		t.Errorf("customize called %d times after a new generation, want 2", n)
	}
	recreated := parent.DeepCopy()
	recreated.SetUID(types.UID("another-" + string(parent.GetUID())))
	f.relatedKeys(t, recreated)
	if n := f.calls.Load(); n != 3 {
		t.Errorf("customize called %d times after the parent was recreated, want 3", n)
	}
	// Forget drops the answer too.
	f.resolver.Forget(own + "/p")
	f.relatedKeys(t, recreated)
	if n := f.calls.Load(); n != 4 {
		t.Errorf("customize called %d times after Forget, want 4", n)
	}
}

// TestCustomizeAnswerIsRefreshed: a kept customize answer is asked for
// again when the parent's labels change, and once it is older than
// DefaultAnswerTTL (metacontroller's 20 minutes), so an answer over a
// parent without a generation (a ConfigMap, a Namespace) is not kept
// until restart.
func TestCustomizeAnswerIsRefreshed(t *testing.T) {
	own := env.CreateNamespace(t)
	createConfigMap(t, own, "a", nil)
	clock := &fakeClock{}
	f := newFixtureOptions(t, envOptions(t, related.Options[string]{Now: clock.Now}), ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2,
		map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"a"}})
	checkAnswerIsRefreshed(t, f, clock, parentIn(own))
}

// TestOnlyMatchingChangesResyncAParent: a related object's change
// enqueues the parents whose rules select it, not the others, and not a
// parent that was forgotten. Two parents in two namespaces share a
// Resolver whose v1 rule selects in the parent's own namespace; as events
// of one informer are handled in order, once one parent was enqueued for
// an event, the other's turn for that event has passed.
func TestOnlyMatchingChangesResyncAParent(t *testing.T) {
	nsP, nsQ := env.CreateNamespace(t), env.CreateNamespace(t)
	labels := map[string]any{"related-test": label(t)}
	f := newFixture(t, nil, v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": labels}})
	p, q := parentIn(nsP), parentIn(nsQ)
	f.relatedKeys(t, p)
	f.relatedKeys(t, q)
	keyP, keyQ := nsP+"/p", nsQ+"/p"

	createConfigMap(t, nsQ, "one", labels)
	testenv.Eventually(t, 30*time.Second, "q re-synced for an object in its namespace", func(context.Context) (bool, error) {
		return f.timesEnqueued(keyQ) == 1, nil
	})
	if n := f.timesEnqueued(keyP); n != 0 {
		t.Errorf("p re-synced %d times for an object in another namespace", n)
	}
	createConfigMap(t, nsP, "unlabelled", nil)
	createConfigMap(t, nsP, "two", labels)
	testenv.Eventually(t, 30*time.Second, "p re-synced for an object in its namespace", func(context.Context) (bool, error) {
		return f.timesEnqueued(keyP) >= 1, nil
	})
	if n := f.timesEnqueued(keyP); n != 1 {
		t.Errorf("p re-synced %d times, want once: an object its rule does not select re-synced it", n)
	}

	f.resolver.Forget(keyP)
	createConfigMap(t, nsP, "three", labels)
	createConfigMap(t, nsQ, "four", labels)
	testenv.Eventually(t, 30*time.Second, "q re-synced again", func(context.Context) (bool, error) {
		return f.timesEnqueued(keyQ) == 2, nil
	})
	if n := f.timesEnqueued(keyP); n != 1 {
		t.Errorf("p, forgotten, was re-synced again (%d times in all)", n)
	}
}

// TestNamespaceSelectorOnAClusterScopedResourceFails: a rule with a
// namespaceSelector for a cluster-scoped resource (namespaces) fails the
// sync, naming the setting, as metacontroller fails it, where it selected
// every object of the resource.
func TestNamespaceSelectorOnAClusterScopedResourceFails(t *testing.T) {
	own := env.CreateNamespace(t)
	f := newFixture(t, ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "namespaces",
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": own}}})
	if err := resolve(t, f, parentIn(own)); err == nil || !strings.Contains(err.Error(), "namespaceSelector on namespaces") {
		t.Errorf("Related: got %v, want an error about the namespaceSelector on namespaces", err)
	}
}
