package related_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// What the tests of the Resolver share, with a control plane
// (related_test.go) or without (rules_test.go).

// fixture is a Resolver of one controller against the test's API server,
// whose customize hook answers rules, and the parent keys it enqueued.
type fixture struct {
	resolver *related.Resolver[string]
	// version is the version of the hook that receives the objects.
	version  v1alpha1.HookVersion
	mu       sync.Mutex
	enqueued []string
	// calls counts the customize hook's calls.
	calls atomic.Int64
	// rules are what the customize hook answers; setRules changes them.
	rules atomic.Pointer[[]map[string]any]
	// informers is the Resolver's informer factory.
	informers *informer.Factory
}

// setRules changes the customize hook's answer (seen by a parent's next
// generation).
func (f *fixture) setRules(rules ...map[string]any) { f.rules.Store(&rules) }

// newFixtureOptions is newFixture with the Resolver's Resources,
// Informers, MaxObjects, MaxRules, MaxResources and MayRead taken from
// opts.
func newFixtureOptions(t *testing.T, opts related.Options[string], customizeVersion *v1alpha1.HookVersion, syncVersion v1alpha1.HookVersion, rules ...map[string]any) *fixture {
	t.Helper()
	f := &fixture{version: syncVersion}
	f.setRules(rules...)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{"relatedResources": *f.rules.Load()})
	}))
	t.Cleanup(server.Close)
	f.informers = opts.Informers
	customize := &v1alpha1.Hook{Version: customizeVersion, Webhook: &v1alpha1.Webhook{URL: ptr.To(server.URL + "/customize")}}
	f.resolver = related.New(related.Options[string]{
		Object:       &unstructured.Unstructured{Object: map[string]any{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": map[string]any{"name": "test"}}},
		Customize:    customize,
		Hooks:        &engine.HookCaller{Hooks: hookclient.NewClient(hookclient.Options{}), Controller: "test"},
		Resources:    opts.Resources,
		Informers:    f.informers,
		MaxObjects:   opts.MaxObjects,
		MaxRules:     opts.MaxRules,
		MaxResources: opts.MaxResources,
		MayRead:      opts.MayRead,
		Now:          opts.Now,
		Enqueue: func(key string, _ trigger.Trigger) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.enqueued = append(f.enqueued, key)
		},
	})
	t.Cleanup(f.resolver.Close)
	return f
}

func (f *fixture) timesEnqueued(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, k := range f.enqueued {
		if k == key {
			n++
		}
	}
	return n
}

func (f *fixture) wasEnqueued(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.enqueued, key)
}

// relatedKeys returns the keys of the related ConfigMaps of parent.
func (f *fixture) relatedKeys(t *testing.T, parent *unstructured.Unstructured) []string {
	t.Helper()
	got, err := f.objects(parent)
	if err != nil {
		t.Fatalf("Related: %v", err)
	}
	return keysOf(got["ConfigMap.v1"])
}

// keysOf returns the keys of objs, sorted.
func keysOf(objs map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parentIn(namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metactl.io/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "p", "namespace": namespace, "uid": "uid-" + namespace, "generation": int64(1)},
	}}
}

func want(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: related objects %v, want %v", what, got, want)
	}
}

// asAccount returns opts with a MayRead that allows every read when it
// has none: the Resolver of a controller acting as a ServiceAccount
// allowed everything, whose rules reach wherever they say. (Without
// MayRead, a namespaced parent's rules stay in its namespace:
// TestRulesOfAControllerWithoutAccountStayInTheParentsNamespace.)
func asAccount(opts related.Options[string]) related.Options[string] {
	if opts.MayRead == nil {
		opts.MayRead = func(context.Context, *discovery.Resource, string) error { return nil }
	}
	return opts
}

// mayReadRefusing is a MayRead that refuses the resource named refused
// with err, and the questions it was asked, as "resource in \"namespace\"".
func mayReadRefusing(refused string, err error) (mayRead func(context.Context, *discovery.Resource, string) error, asked func() []string) {
	var (
		mu sync.Mutex
		qs []string
	)
	mayRead = func(_ context.Context, res *discovery.Resource, namespace string) error {
		mu.Lock()
		defer mu.Unlock()
		qs = append(qs, res.Name+" in "+strconv.Quote(namespace))
		if res.Name == refused {
			return err
		}
		return nil
	}
	asked = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(qs)
	}
	return mayRead, asked
}

// objects is the Resolver's Related for parent, as a sync of it asks.
func (f *fixture) objects(parent *unstructured.Unstructured) (hooks.ObjectMap, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := parent.GetName()
	if ns := parent.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	return f.resolver.Related(ctx, nil, hookclient.CallOptions{}, key, parent, parent.GetNamespace() != "", f.version, nil)
}

// fakeClock is a clock for Options.Now that moves only when told.
type fakeClock struct{ nanos atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.nanos.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.nanos.Add(int64(d)) }

// checkAnswerIsRefreshed checks that f's Resolver, whose clock is clock,
// asks the customize hook about parent (given without a generation, as a
// ConfigMap is) again once the kept answer is DefaultAnswerTTL old, and
// when the parent's labels change, and not otherwise.
func checkAnswerIsRefreshed(t *testing.T, f *fixture, clock *fakeClock, parent *unstructured.Unstructured) {
	t.Helper()
	parent.SetGeneration(0)
	calls := func(what string, want int64) {
		t.Helper()
		if n := f.calls.Load(); n != want {
			t.Errorf("%s: customize called %d times, want %d", what, n, want)
		}
	}
	f.relatedKeys(t, parent)
	clock.Advance(related.DefaultAnswerTTL - time.Second)
	f.relatedKeys(t, parent)
	calls("within the TTL", 1)
	clock.Advance(time.Second)
	f.relatedKeys(t, parent)
	calls("at the TTL", 2)
	parent.SetLabels(map[string]string{"tier": "gold"})
	f.relatedKeys(t, parent)
	calls("labels changed", 3)
	f.relatedKeys(t, parent)
	calls("labels the same again", 3)
}

func (f *fixture) related(t *testing.T, parent *unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.resolver.Related(ctx, nil, hookclient.CallOptions{}, parent.GetNamespace()+"/"+parent.GetName(), parent, true, f.version, nil); err != nil {
		t.Fatalf("Related: %v", err)
	}
}

// wantInformers checks the informers the Resolver holds and, as it is the
// factory's only user, those running.
func (f *fixture) wantInformers(t *testing.T, what string, want ...schema.GroupVersionResource) {
	t.Helper()
	var held, running, wantKeys []string
	for _, gvr := range f.resolver.Informers() {
		held = append(held, gvr.String())
	}
	for key := range f.informers.Counts() {
		running = append(running, key)
	}
	for _, gvr := range want {
		wantKeys = append(wantKeys, gvr.String())
	}
	slices.Sort(held)
	slices.Sort(running)
	slices.Sort(wantKeys)
	if !slices.Equal(held, wantKeys) || !slices.Equal(running, wantKeys) {
		t.Errorf("%s: the Resolver holds informers of %q and %q run, want %q", what, held, running, wantKeys)
	}
}
