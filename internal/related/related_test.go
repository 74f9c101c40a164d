//go:build integration

package related_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// newFixture builds a Resolver whose customize hook (of customizeVersion,
// nil for unset) answers rules, for hooks of syncVersion.
func newFixture(t *testing.T, customizeVersion *v1alpha1.HookVersion, syncVersion v1alpha1.HookVersion, rules ...map[string]any) *fixture {
	t.Helper()
	return newFixtureWith(t, 0, customizeVersion, syncVersion, rules...)
}

// newFixtureWith is newFixture with a limit of related objects (0: the
// default).
func newFixtureWith(t *testing.T, maxObjects int, customizeVersion *v1alpha1.HookVersion, syncVersion v1alpha1.HookVersion, rules ...map[string]any) *fixture {
	t.Helper()
	return newFixtureOptions(t, envOptions(t, related.Options[string]{MaxObjects: maxObjects}), customizeVersion, syncVersion, rules...)
}

// envOptions returns opts with Resources and Informers of the test's
// API server.
func envOptions(t *testing.T, opts related.Options[string]) related.Options[string] {
	t.Helper()
	resources := discovery.NewResourceMap(env.Kube.Discovery(), discovery.Options{})
	if err := resources.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	objects, err := objectclient.New(env.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Resources, opts.Informers = resources, informer.NewFactory(objects.ListerWatcher, informer.Options{})
	return asAccount(opts)
}

func createConfigMap(t *testing.T, ns, name string, labels map[string]any) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels}}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// label is a label value for the test alone.
func label(t *testing.T) string {
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))[:min(len(t.Name()), 60)]
}

// TestV2RulesWithoutANamespaceSelectEveryNamespace: under a v2 customize
// hook, a namespaced parent's rule with neither namespace nor
// namespaceSelector selects in every namespace, by labels or by names; a
// namespace restricts it to that namespace; and an object appearing in yet
// another namespace re-syncs the parent.
func TestV2RulesWithoutANamespaceSelectEveryNamespace(t *testing.T) {
	own, other, third := env.CreateNamespace(t), env.CreateNamespace(t), env.CreateNamespace(t)
	sel := label(t)
	labels := map[string]any{"related-test": sel}
	createConfigMap(t, own, "a", labels)
	createConfigMap(t, other, "b", labels)
	createConfigMap(t, own, sel, nil)
	createConfigMap(t, other, sel, nil)
	v2 := ptr.To(v1alpha1.HookVersionV2)
	parent := parentIn(own)

	byLabels := map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": labels}}
	want(t, "labels, no namespace", newFixture(t, v2, v1alpha1.HookVersionV2, byLabels).relatedKeys(t, parent), own+"/a", other+"/b")

	// No object matches at first, so nothing re-syncs the parent until
	// one appears in another namespace.
	lateLabels := map[string]any{"related-test": sel + "-late"}
	late := newFixture(t, v2, v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": lateLabels}})
	want(t, "nothing yet", late.relatedKeys(t, parent))
	createConfigMap(t, third, "c", lateLabels)
	testenv.Eventually(t, 30*time.Second, "the parent re-synced for an object in a third namespace", func(context.Context) (bool, error) {
		return late.wasEnqueued(own + "/p"), nil
	})
	want(t, "the late object", late.relatedKeys(t, parent), third+"/c")

	byNames := map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{sel}}
	want(t, "names, no namespace", newFixture(t, v2, v1alpha1.HookVersionV2, byNames).relatedKeys(t, parent), own+"/"+sel, other+"/"+sel)

	inOther := map[string]any{"apiVersion": "v1", "resource": "configmaps", "namespace": other,
		"labelSelector": map[string]any{"matchLabels": labels}}
	want(t, "labels in one namespace", newFixture(t, v2, v1alpha1.HookVersionV2, inOther).relatedKeys(t, parent), other+"/b")
}

// TestTheCustomizeHooksVersionDecides: the namespace rules follow the
// customize hook's own version, not the sync hook's, which only keys the
// objects.
func TestTheCustomizeHooksVersionDecides(t *testing.T) {
	own, other := env.CreateNamespace(t), env.CreateNamespace(t)
	labels := map[string]any{"related-test": label(t)}
	createConfigMap(t, own, "a", labels)
	createConfigMap(t, other, "b", labels)
	parent := parentIn(own)
	inOther := map[string]any{"apiVersion": "v1", "resource": "configmaps", "namespace": other,
		"labelSelector": map[string]any{"matchLabels": labels}}
	noNamespace := map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": labels}}

	// A v1 customize hook (unset or explicit) under a v2 sync hook: the
	// parent's own namespace only, keyed namespace/name; a rule naming
	// another namespace fails the sync, as in metacontroller.
	if _, err := newFixture(t, nil, v1alpha1.HookVersionV2, inOther).objects(parent); err == nil || !strings.Contains(err.Error(), "set the customize hook's version to v2") {
		t.Errorf("v1 customize naming another namespace: got error %v, want one that says to use v2", err)
	}
	want(t, "explicit v1 customize, v2 sync", newFixture(t, ptr.To(v1alpha1.HookVersionV1), v1alpha1.HookVersionV2, noNamespace).relatedKeys(t, parent), own+"/a")
	// A v2 customize hook under a v1 sync hook selects in every namespace,
	// but a v1 request, which keys a namespaced parent's objects by name,
	// gets those of the parent's namespace only.
	want(t, "v2 customize, v1 sync", newFixture(t, ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV1, noNamespace).relatedKeys(t, parent), "a")
}

// TestV1RequestsGetTheParentsNamespaceOnly: a v1 sync hook of a
// namespaced parent whose v2 customize hook selects objects of the same
// name in two namespaces, and cluster-scoped objects, gets only the one of
// the parent's namespace (no collision by informer order) and no
// cluster-scoped one, as metacontroller does; a v2 sync hook gets all.
func TestV1RequestsGetTheParentsNamespaceOnly(t *testing.T) {
	own, other := env.CreateNamespace(t), env.CreateNamespace(t)
	name := label(t)
	createConfigMap(t, other, name, nil) // first, so that informer order would favour it
	createConfigMap(t, own, name, nil)
	rules := []map[string]any{
		{"apiVersion": "v1", "resource": "configmaps", "names": []any{name}},
		{"apiVersion": "v1", "resource": "namespaces", "names": []any{own}},
	}
	v2 := ptr.To(v1alpha1.HookVersionV2)
	got, err := newFixture(t, v2, v1alpha1.HookVersionV1, rules...).objects(parentIn(own))
	if err != nil {
		t.Fatal(err)
	}
	if cm := got["ConfigMap.v1"][name]; cm == nil || cm.GetNamespace() != own || len(got["ConfigMap.v1"]) != 1 {
		t.Errorf("v1 request: ConfigMaps %v, want the one of namespace %s only", keysOf(got["ConfigMap.v1"]), own)
	}
	if n := len(got["Namespace.v1"]); n != 0 {
		t.Errorf("v1 request: %d cluster-scoped Namespaces, want none", n)
	}
	all, err := newFixture(t, v2, v1alpha1.HookVersionV2, rules...).objects(parentIn(own))
	if err != nil {
		t.Fatal(err)
	}
	want(t, "v2 request: both ConfigMaps", keysOf(all["ConfigMap.v1"]), own+"/"+name, other+"/"+name)
	want(t, "v2 request: the Namespace", keysOf(all["Namespace.v1"]), own)
}

// TestClusterScopedParentsSelectEveryNamespace: a cluster-scoped parent's
// rule without a namespace selects in every namespace under either
// version, and a namespace restricts it.
func TestClusterScopedParentsSelectEveryNamespace(t *testing.T) {
	one, two := env.CreateNamespace(t), env.CreateNamespace(t)
	labels := map[string]any{"related-test": label(t)}
	createConfigMap(t, one, "a", labels)
	createConfigMap(t, two, "b", labels)
	parent := parentIn("")
	noNamespace := map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"labelSelector": map[string]any{"matchLabels": labels}}
	inTwo := map[string]any{"apiVersion": "v1", "resource": "configmaps", "namespace": two,
		"labelSelector": map[string]any{"matchLabels": labels}}
	for _, version := range []*v1alpha1.HookVersion{nil, ptr.To(v1alpha1.HookVersionV2)} {
		want(t, "no namespace", newFixture(t, version, v1alpha1.HookVersionV1, noNamespace).relatedKeys(t, parent), one+"/a", two+"/b")
		want(t, "one namespace", newFixture(t, version, v1alpha1.HookVersionV1, inTwo).relatedKeys(t, parent), two+"/b")
	}
}

// TestNamespaceSelectorAsksToReadNamespaces: a rule that selects
// namespaces by label is served from the namespaces cache, so MayRead is
// asked about namespaces (every namespace) as well as the rule's resource,
// and its refusal fails the sync.
func TestNamespaceSelectorAsksToReadNamespaces(t *testing.T) {
	ns := env.CreateNamespace(t)
	labels := map[string]any{"related-test": label(t)}
	createConfigMap(t, ns, "a", labels)
	rule := map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}},
		"labelSelector":     map[string]any{"matchLabels": labels}}
	refused := errors.New("may not list namespaces")
	mayRead, asked := mayReadRefusing("namespaces", refused)
	f := newFixtureOptions(t, envOptions(t, related.Options[string]{MayRead: mayRead}), ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, rule)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parent := parentIn(ns)
	_, err := f.resolver.Related(ctx, nil, hookclient.CallOptions{}, ns+"/"+parent.GetName(), parent, true, f.version, nil)
	if !errors.Is(err, refused) {
		t.Errorf("Related: got %v, want the refusal to read namespaces", err)
	}
	if !slices.Contains(asked(), `namespaces in ""`) {
		t.Errorf("MayRead asked %q, want namespaces in every namespace among them", asked())
	}
}
