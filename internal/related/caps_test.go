package related_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// The caps on what one customize answer, and one controller's answers
// together, may declare; without an API server.

var (
	capConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	capSecrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// capFixture is a Resolver over in-memory ConfigMaps a and b of namespace
// ns (and no Secrets or namespaces), with opts' limits.
func capFixture(t *testing.T, opts related.Options[string], rules ...map[string]any) *fixture {
	t.Helper()
	opts.Resources = inmemory.Resources(t, &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"list", "watch"}},
		{Name: "secrets", Kind: "Secret", Namespaced: true, Verbs: []string{"list", "watch"}},
		{Name: "namespaces", Kind: "Namespace", Verbs: []string{"list", "watch"}},
	}})
	opts.Informers = inmemory.Informers(map[schema.GroupVersionResource][]*unstructured.Unstructured{
		capConfigMaps: {inmemory.Object("v1", "ConfigMap", "ns", "a", nil, nil), inmemory.Object("v1", "ConfigMap", "ns", "b", nil, nil)},
	})
	// v2 rules in every namespace: a controller acting as an account.
	return newFixtureOptions(t, asAccount(opts), ptr.To(v1alpha1.HookVersionV2), v1alpha1.HookVersionV2, rules...)
}

func configMapsRule(names ...any) map[string]any {
	return map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": names}
}

// TestCustomizeRulesAreCapped: a customize answer with more rules than
// the limit fails the sync with an error that says how many, the limit
// and the flag, starts no informer, and is not kept (the next sync asks
// the hook again); one at the limit is served.
func TestCustomizeRulesAreCapped(t *testing.T) {
	f := capFixture(t, related.Options[string]{MaxRules: 2}, configMapsRule("a"), configMapsRule("b"), configMapsRule("c"))
	parent := parentIn("ns")
	for range 2 {
		_, err := f.resolver.Related(t.Context(), nil, hookclient.CallOptions{}, "ns/p", parent, true, f.version, nil)
		var tooMany *related.TooManyRulesError
		if !errors.As(err, &tooMany) {
			t.Fatalf("3 rules with a limit of 2: %v, want a *TooManyRulesError", err)
		}
		for _, want := range []string{"3 relatedResources rules", "limit of 2", "--max-related-rules"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("the customize hook was called %d times for two syncs, want 2: a refused answer is not kept", n)
	}
	if got := f.resolver.Informers(); len(got) != 0 {
		t.Errorf("a refused answer started informers %v", got)
	}
	f.setRules(configMapsRule("a"), configMapsRule("b"))
	parent.SetGeneration(2)
	want(t, "2 rules with a limit of 2", f.relatedKeys(t, parent), "ns/a", "ns/b")
}

// TestRelatedResourcesAreCapped: the distinct resources the rules of all
// of a controller's parents declare (namespaces counting for a
// namespaceSelector) are at most the limit: a parent whose rules would go
// over fails its sync with an error naming the resources, the limit and
// the flag, and no informer is started for it; a parent's own resources
// count once, and a parent that redeclares what it had is not refused.
func TestRelatedResourcesAreCapped(t *testing.T) {
	f := capFixture(t, related.Options[string]{MaxResources: 1}, configMapsRule("a"))
	p, q := parentIn("ns"), parentIn("ns")
	q.SetName("q")
	q.SetUID("uid-q")
	f.related(t, p)
	f.related(t, q) // the same resource: still one
	f.setRules(map[string]any{"apiVersion": "v1", "resource": "secrets", "names": []any{"s"}})
	q.SetGeneration(2)
	_, err := f.resolver.Related(t.Context(), nil, hookclient.CallOptions{}, "ns/q", q, true, f.version, nil)
	var tooMany *related.TooManyResourcesError
	if !errors.As(err, &tooMany) {
		t.Fatalf("q declares secrets while p declares configmaps, limit 1: %v, want a *TooManyResourcesError", err)
	}
	for _, want := range []string{"2 distinct resources", "configmaps, secrets", "--max-controller-resources"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	f.wantInformers(t, "the refused rules started none", capConfigMaps)

	// p alone switching from configmaps to secrets is one resource.
	f.resolver.Forget("ns/q")
	p.SetGeneration(2)
	f.related(t, p)
	f.wantInformers(t, "p switched to secrets", capSecrets)

	// A namespaceSelector counts the namespaces it watches.
	f.setRules(map[string]any{"apiVersion": "v1", "resource": "secrets", "namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "x"}}})
	p.SetGeneration(3)
	if _, err := f.resolver.Related(t.Context(), nil, hookclient.CallOptions{}, "ns/p", p, true, f.version, nil); !errors.As(err, &tooMany) {
		t.Errorf("secrets by namespaceSelector with a limit of 1: %v, want a *TooManyResourcesError", err)
	}
}

// TestRelatedObjectsAreCountedBeforeDecoding: the objects the rules select
// are given to the sync's Counter, each once, before anything is
// returned; the Counter's error fails the sync and no object is returned.
func TestRelatedObjectsAreCountedBeforeDecoding(t *testing.T) {
	f := capFixture(t, related.Options[string]{}, configMapsRule("a", "b"), configMapsRule("a"))
	var counted []string
	refusal := errors.New("over the limit")
	count := func(_ context.Context, objs []*informer.Object) error {
		for _, o := range objs {
			counted = append(counted, o.Namespace+"/"+o.Name)
		}
		return refusal
	}
	got, err := f.resolver.Related(t.Context(), nil, hookclient.CallOptions{}, "ns/p", parentIn("ns"), true, f.version, count)
	if !errors.Is(err, refusal) || got != nil {
		t.Errorf("Related with a refusing Counter: %v and %d kinds of objects, want the Counter's error and none", err, len(got))
	}
	sort.Strings(counted)
	want(t, "counted", counted, "ns/a", "ns/b")
}
