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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// Fast twins of the integration tests of the Resolver: in-memory
// discovery and informers over fixed objects stand for the API server.

var (
	memConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	memSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	memNamespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// memOptions returns opts with in-memory Resources (configmaps, secrets,
// namespaces) and Informers over objs.
func memOptions(t *testing.T, opts related.Options[string], objs ...*unstructured.Unstructured) related.Options[string] {
	t.Helper()
	byGVR := map[schema.GroupVersionResource][]*unstructured.Unstructured{}
	for _, o := range objs {
		gvr := memConfigMaps
		switch o.GetKind() {
		case "Secret":
			gvr = memSecrets
		case "Namespace":
			gvr = memNamespaces
		}
		byGVR[gvr] = append(byGVR[gvr], o)
	}
	verbs := []string{"list", "watch"}
	opts.Resources = inmemory.Resources(t, &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: verbs},
		{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: verbs},
		{Name: "namespaces", Kind: "Namespace", Verbs: verbs},
	}})
	opts.Informers = inmemory.Informers(byGVR)
	return asAccount(opts)
}

func resolve(t *testing.T, f *fixture, parent *unstructured.Unstructured) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := f.resolver.Related(ctx, nil, hookclient.CallOptions{}, parent.GetNamespace()+"/"+parent.GetName(), parent, true, f.version, nil)
	return err
}

// TestRelatedObjectsAreCappedInMemory: rules that together select more
// related objects than MaxObjects fail with an error naming the rule that
// went over, the count, the limit and the flag; at the limit they do not;
// an object two rules select counts once. Fast twin of the integration
// test TestRelatedObjectsAreCapped.
func TestRelatedObjectsAreCappedInMemory(t *testing.T) {
	labels := map[string]string{"related-test": "capped"}
	objs := []*unstructured.Unstructured{
		inmemory.Object("v1", "ConfigMap", "own", "a", labels, nil),
		inmemory.Object("v1", "ConfigMap", "own", "b", labels, nil),
		inmemory.Object("v1", "ConfigMap", "own", "c", labels, nil),
		inmemory.Object("v1", "ConfigMap", "own", "d", nil, nil),
	}
	rules := []map[string]any{
		{"apiVersion": "v1", "resource": "configmaps", "names": []any{"a", "d"}},
		{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": map[string]any{"related-test": "capped"}}},
	}
	over := newFixtureOptions(t, memOptions(t, related.Options[string]{MaxObjects: 3}, objs...), nil, v1alpha1.HookVersionV2, rules...)
	err := resolve(t, over, parentIn("own"))
	if err == nil {
		t.Fatal("4 related objects with a limit of 3: no error")
	}
	for _, want := range []string{"relatedResources[1] (configmaps)", "4 related objects", "limit of 3", "--max-related-objects"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	at := newFixtureOptions(t, memOptions(t, related.Options[string]{MaxObjects: 4}, objs...), nil, v1alpha1.HookVersionV2, rules...)
	if err := resolve(t, at, parentIn("own")); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// TestCustomizeAnswerIsKeptPerGenerationInMemory: the customize hook is
// called once per generation of a parent, again for a recreated parent
// (another UID) and after Forget. Fast twin of the integration test
// TestCustomizeAnswerIsKeptPerGeneration.
func TestCustomizeAnswerIsKeptPerGenerationInMemory(t *testing.T) {
	f := newFixtureOptions(t, memOptions(t, related.Options[string]{}, inmemory.Object("v1", "ConfigMap", "own", "a", nil, nil)),
		ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"a"}})
	parent := parentIn("own")
	calls := func(what string, want int64) {
		t.Helper()
		if n := f.calls.Load(); n != want {
			t.Errorf("%s: customize called %d times, want %d", what, n, want)
		}
	}
	for range 3 {
		want(t, "same generation", f.relatedKeys(t, parent), "own/a")
	}
	calls("one generation", 1)
	parent.SetGeneration(2)
	f.relatedKeys(t, parent)
	calls("a new generation", 2)
	recreated := parent.DeepCopy()
	recreated.SetUID(types.UID("another"))
	f.relatedKeys(t, recreated)
	calls("the parent recreated", 3)
	f.resolver.Forget("own/p")
	f.relatedKeys(t, recreated)
	calls("after Forget", 4)
}

// TestCustomizeAnswerIsRefreshedInMemory: fast twin of the integration
// test TestCustomizeAnswerIsRefreshed.
func TestCustomizeAnswerIsRefreshedInMemory(t *testing.T) {
	clock := &fakeClock{}
	f := newFixtureOptions(t, memOptions(t, related.Options[string]{Now: clock.Now}, inmemory.Object("v1", "ConfigMap", "own", "a", nil, nil)),
		ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"a"}})
	checkAnswerIsRefreshed(t, f, clock, parentIn("own"))
}

// TestNamespaceSelectorAsksToReadNamespacesInMemory: a rule that selects
// namespaces by label makes the Resolver ask MayRead about namespaces in
// every namespace, and a refusal fails Related. Fast twin of the
// integration test TestNamespaceSelectorAsksToReadNamespaces.
func TestNamespaceSelectorAsksToReadNamespacesInMemory(t *testing.T) {
	refused := errors.New("may not list namespaces")
	mayRead, asked := mayReadRefusing("namespaces", refused)
	opts := memOptions(t, related.Options[string]{MayRead: mayRead}, inmemory.Object("v1", "Namespace", "", "own", map[string]string{"team": "red"}, nil))
	f := newFixtureOptions(t, opts, ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "red"}}})
	if err := resolve(t, f, parentIn("own")); !errors.Is(err, refused) {
		t.Errorf("Related: got %v, want the refusal to read namespaces", err)
	}
	if !slices.Contains(asked(), `namespaces in ""`) {
		t.Errorf("MayRead asked %q, want namespaces in every namespace among them", asked())
	}
}

// TestUnusedRelatedInformersAreReleasedInMemory: an informer started for
// a related resource is released once no parent's rules use it (a new
// answer no longer declares it, or the last parent declaring it is
// forgotten), not while another parent still declares it; the namespaces
// informer goes with the last rule that selects namespaces by label. Fast
// twin of the integration test TestUnusedRelatedInformersAreReleased.
func TestUnusedRelatedInformersAreReleasedInMemory(t *testing.T) {
	f := newFixtureOptions(t, memOptions(t, related.Options[string]{}), ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2,
		map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"related-test": "released"}}})
	p, q := parentIn("own"), parentIn("own")
	q.SetName("q")
	q.SetUID("uid-q")
	held := func(what string, want ...schema.GroupVersionResource) {
		t.Helper()
		if err := resolve(t, f, p); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var got, wantKeys []string
		for _, gvr := range f.resolver.Informers() {
			got = append(got, gvr.String())
		}
		for key := range f.informers.Counts() {
			got = append(got, "running "+key)
		}
		for _, gvr := range want {
			wantKeys = append(wantKeys, gvr.String(), "running "+gvr.String())
		}
		slices.Sort(got)
		slices.Sort(wantKeys)
		if !slices.Equal(got, wantKeys) {
			t.Errorf("%s: informers %q, want %q", what, got, wantKeys)
		}
	}
	for _, parent := range []*unstructured.Unstructured{p, q} {
		if err := resolve(t, f, parent); err != nil {
			t.Fatal(err)
		}
	}
	held("both parents declare configmaps", memConfigMaps, memNamespaces)
	f.setRules(map[string]any{"apiVersion": "v1", "resource": "secrets", "names": []any{"s"}})
	p.SetGeneration(2)
	held("q still declares configmaps", memConfigMaps, memNamespaces, memSecrets)
	f.resolver.Forget("own/q")
	held("q forgotten", memSecrets)
	f.setRules()
	p.SetGeneration(3)
	held("no rules")
}

// TestForgetIfReleasesTheForgottenParentsInformers: ForgetIf forgets the
// parents whose keys it is told to, and the informers only they used go;
// a parent not forgotten keeps its own.
func TestForgetIfReleasesTheForgottenParentsInformers(t *testing.T) {
	f := newFixtureOptions(t, memOptions(t, related.Options[string]{}), ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2,
		map[string]any{"apiVersion": "v1", "resource": "configmaps"})
	kept, gone := parentIn("kept"), parentIn("gone")
	for _, parent := range []*unstructured.Unstructured{kept, gone} {
		if err := resolve(t, f, parent); err != nil {
			t.Fatal(err)
		}
	}
	f.setRules(map[string]any{"apiVersion": "v1", "resource": "secrets"})
	kept.SetGeneration(2)
	if err := resolve(t, f, kept); err != nil {
		t.Fatal(err)
	}
	held := func() []string {
		var out []string
		for _, gvr := range f.resolver.Informers() {
			out = append(out, gvr.String())
		}
		slices.Sort(out)
		return out
	}
	if got, want := held(), []string{memConfigMaps.String(), memSecrets.String()}; !slices.Equal(got, want) {
		t.Fatalf("informers %q before ForgetIf, want %q", got, want)
	}
	f.resolver.ForgetIf(func(key string) bool { return strings.HasPrefix(key, "gone/") })
	if got, want := held(), []string{memSecrets.String()}; !slices.Equal(got, want) {
		t.Errorf("informers %q after forgetting gone/p, want %q: configmaps were only its", got, want)
	}
}

// TestNamespaceSelectorOnAClusterScopedResourceFailsInMemory: a rule with
// a namespaceSelector for a cluster-scoped resource fails the sync, naming
// the setting, as metacontroller fails it. Fast twin of the integration
// test TestNamespaceSelectorOnAClusterScopedResourceFails.
func TestNamespaceSelectorOnAClusterScopedResourceFailsInMemory(t *testing.T) {
	opts := memOptions(t, related.Options[string]{}, inmemory.Object("v1", "Namespace", "", "own", map[string]string{"team": "red"}, nil))
	f := newFixtureOptions(t, opts, ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "namespaces",
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "red"}}})
	if err := resolve(t, f, parentIn("own")); err == nil || !strings.Contains(err.Error(), "namespaceSelector on namespaces") {
		t.Errorf("Related: got %v, want an error about the namespaceSelector on namespaces", err)
	}
}
