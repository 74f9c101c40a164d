//go:build integration

package objectclient_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/shard"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// env runs kube-apiserver with the ShardedListAndWatch gate: it filters
// lists and watches by shardSelector.
var env *testenv.Environment

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{APIServerFlags: map[string]string{"feature-gates": "ShardedListAndWatch=true"}}, &env)
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// withoutGate starts a second control plane, without the gate, for t.
func withoutGate(t *testing.T) *testenv.Environment {
	t.Helper()
	e, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

func createNamespace(t *testing.T, e *testenv.Environment, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// writeConfigMap creates ns/name, or updates it when it exists.
func writeConfigMap(t *testing.T, e *testenv.Environment, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cms := e.Kube.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	} else {
		cm.Data = map[string]string{"n": fmt.Sprint(len(cm.Data["n"]) + 1)}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// lister lists configmaps through objectclient's ListerWatcher, as the
// cache does.
func lister(t *testing.T, e *testenv.Environment) cache.ListerWatcherWithContext {
	t.Helper()
	c, err := objectclient.New(e.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cache.ToListerWatcherWithContext(c.ListerWatcher(configMaps))
}

func list(t *testing.T, lw cache.ListerWatcherWithContext, selector string) *informer.ObjectList {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{ShardSelector: selector})
	if err != nil {
		t.Fatalf("listing with shardSelector %q: %v", selector, err)
	}
	return obj.(*informer.ObjectList)
}

func keys(objs []informer.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	slices.Sort(out)
	return out
}

// stepZeroNamespaces are namespaces that differ only in a numeric suffix
// (which FNV-1a's top bits hardly see) and namespaces that differ early.
func stepZeroNamespaces() []string {
	var out []string
	for i := 1; i <= 30; i++ {
		out = append(out, fmt.Sprintf("ns-%d", i))
	}
	return append(out, "team-payments", "team-search", "a", "b", "zz", "x9", "tenant-alpha", "tenant-beta",
		"prod", "staging", "dev", "monitoring", "ingress", "cert", "db-main", "db-replica", "web-frontend",
		"api-gateway", "billing", "ml-train", "ml-serve", "logs", "metrics", "q", "r-2", "s-33", "t-444",
		"u5555", "v-v-v", "kube-system2")
}

// TestServerSelectsByOurHash guards internal/shard's hash against the API
// server's: a list with Set.Selector returns exactly the objects whose
// namespace Set.Contains, with metadata.shardInfo echoing the selector,
// for sets of 16, 7 and 1024 buckets; and a watch with the selector
// (from the watch cache) sends the events of those objects only.
func TestServerSelectsByOurHash(t *testing.T) {
	namespaces := stepZeroNamespaces()
	for _, ns := range namespaces {
		createNamespace(t, env, ns)
		writeConfigMap(t, env, ns, "cm")
	}
	lw := lister(t, env)
	all := list(t, lw, "")
	if all.ShardInfo != nil {
		t.Errorf("a list without a selector has shardInfo %v", all.ShardInfo)
	}
	var sets []shard.Set
	used := map[shard.Bucket]bool{}
	for _, ns := range namespaces {
		used[shard.Of(ns, 16)] = true
	}
	for b := range used {
		sets = append(sets, mustSet(t, 16, b))
	}
	sets = append(sets, mustSet(t, 16, 0, 1, 2, 3, 4, 5, 6, 7), mustSet(t, 16, 3, 5, 6, 7),
		mustSet(t, 16, 1, 3, 5, 7, 9, 11, 13, 15), mustSet(t, 16, 15),
		mustSet(t, 7, 1, 2, 5), mustSet(t, 7, 0, 6), mustSet(t, 1024, 10, 500, 501, 1023))
	for _, ns := range namespaces[:5] {
		sets = append(sets, mustSet(t, 1024, shard.Of(ns, 1024)))
	}
	if len(used) < 8 {
		t.Errorf("the namespaces fall in %d of 16 buckets, want at least 8", len(used))
	}
	for _, set := range sets {
		got := list(t, lw, set.Selector())
		var want []informer.Object
		for _, o := range all.Items {
			if set.Contains(o.Namespace) {
				want = append(want, o)
			}
		}
		if g, w := keys(got.Items), keys(want); !slices.Equal(g, w) {
			t.Errorf("set %v: the server listed %v, Contains says %v", set, g, w)
		}
		if got.ShardInfo == nil || got.ShardInfo.Selector != set.Selector() {
			t.Errorf("set %v: shardInfo %v, want the selector", set, got.ShardInfo)
		}
	}

	set := mustSet(t, 16, 0, 1, 2, 3, 4, 5, 6, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ShardSelector: set.Selector(), ResourceVersion: all.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var want []string
	for _, ns := range namespaces {
		writeConfigMap(t, env, ns, "watched")
		if set.Contains(ns) {
			want = append(want, ns+"/watched")
		}
	}
	var got []string
	for len(got) < len(want) {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Bookmark {
				continue
			}
			o, ok := ev.Object.(*informer.Object)
			if !ok {
				t.Fatalf("watch event %s of %T", ev.Type, ev.Object)
			}
			got = append(got, o.Namespace+"/"+o.Name)
		case <-ctx.Done():
			t.Fatalf("watch: %d events of %d: %v", len(got), len(want), got)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("watch with set %v sent %v, want %v", set, got, want)
	}
	t.Logf("%d namespaces in %d of 16 buckets; %d sets listed; %d of %d watch events in set %v",
		len(namespaces), len(used), len(sets), len(got), len(namespaces), set)
}

// TestWithoutTheGateTheSelectorIsIgnored: a server without the gate
// neither refuses a shardSelector nor applies it: lists send everything,
// without shardInfo, and watches every event.
func TestWithoutTheGateTheSelectorIsIgnored(t *testing.T) {
	off := withoutGate(t)
	namespaces := stepZeroNamespaces()[:12]
	for _, ns := range namespaces {
		createNamespace(t, off, ns)
		writeConfigMap(t, off, ns, "cm")
	}
	lw := lister(t, off)
	all := list(t, lw, "")
	set := mustSet(t, 16, shard.Of(namespaces[0], 16))
	got := list(t, lw, set.Selector())
	if g, w := keys(got.Items), keys(all.Items); !slices.Equal(g, w) {
		t.Errorf("without the gate, a list with a selector sent %v, want everything: %v", g, w)
	}
	if got.ShardInfo != nil {
		t.Errorf("without the gate, shardInfo %v", got.ShardInfo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ShardSelector: set.Selector(), ResourceVersion: all.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, ns := range namespaces {
		writeConfigMap(t, off, ns, "watched")
	}
	outside := 0
	for n := 0; n < len(namespaces); {
		select {
		case ev := <-w.ResultChan():
			if o, ok := ev.Object.(*informer.Object); ok && ev.Type != watch.Bookmark {
				n++
				if !set.Contains(o.Namespace) {
					outside++
				}
			}
		case <-ctx.Done():
			t.Fatalf("watch: %d events of %d", n, len(namespaces))
		}
	}
	if outside == 0 {
		t.Error("without the gate, a watch with a selector sent only the set's events")
	}
}

// namespaceIn returns a namespace named after prefix in bucket b of 16.
func namespaceIn(prefix string, b shard.Bucket) string {
	for i := 0; ; i++ {
		if ns := fmt.Sprintf("%s-%d", prefix, i); shard.Of(ns, 16) == b {
			return ns
		}
	}
}

func mustSet(t *testing.T, buckets int, members ...shard.Bucket) shard.Set {
	t.Helper()
	s, err := shard.NewSet(buckets, members...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recorder records the events of the namespaces of prefix.
type recorder struct {
	prefix string
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, obj any) {
	o := informer.ObjectOf(obj)
	if o == nil || !strings.HasPrefix(o.Namespace, r.prefix) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, o.Namespace+"/"+o.Name))
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				r.add("add-initial %s", obj)
			} else {
				r.add("add %s", obj)
			}
		},
		UpdateFunc: func(_, obj any) { r.add("update %s", obj) },
		DeleteFunc: func(obj any) { r.add("delete %s", obj) },
	}
}

func (r *recorder) since(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.events[n:])
	slices.Sort(out)
	return out
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func cached(i *informer.Informer, prefix string) []string {
	var out []string
	for _, o := range i.ListMeta("", nil) {
		if strings.HasPrefix(o.Namespace, prefix) {
			out = append(out, o.Namespace+"/"+o.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestInformerHeldToASet: on a server with and without the gate, an
// informer held to a set caches exactly the set's objects, says whether
// the server filtered, and a change of set tells a handler only of the
// objects of the bucket taken; then events of the new set alone arrive.
func TestInformerHeldToASet(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate %v", gate), func(t *testing.T) {
			e, wantMode := env, informer.ModeServer
			if !gate {
				e, wantMode = withoutGate(t), informer.ModeClient
			}
			const bx, by, bz = 3, 8, 12
			prefix := "held"
			nsX, nsY, nsZ := namespaceIn(prefix+"-x", bx), namespaceIn(prefix+"-y", by), namespaceIn(prefix+"-z", bz)
			for _, ns := range []string{nsX, nsY, nsZ} {
				createNamespace(t, e, ns)
				writeConfigMap(t, e, ns, "one")
				writeConfigMap(t, e, ns, "two")
			}
			c, err := objectclient.New(e.Config, nil)
			if err != nil {
				t.Fatal(err)
			}
			f := informer.NewFactory(c.ListerWatcher, informer.Options{Namespaced: func(schema.GroupVersionResource) bool { return true }})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := f.Hold(ctx, mustSet(t, 16, bx, by)); err != nil {
				t.Fatal(err)
			}
			i := f.Acquire(configMaps)
			defer i.Release()
			rec := &recorder{prefix: prefix}
			if err := i.AddEventHandler(rec.handler()); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 30*time.Second, "the informer to sync", func(context.Context) (bool, error) { return i.HasSynced(), nil })
			if got, want := cached(i, prefix), []string{nsX + "/one", nsX + "/two", nsY + "/one", nsY + "/two"}; !slices.Equal(got, want) {
				t.Errorf("cached %v, want %v", got, want)
			}
			if got := f.FilterModes()[configMaps.String()]; got != wantMode {
				t.Errorf("filter mode %q, want %q", got, wantMode)
			}

			n := rec.len()
			if err := f.Hold(ctx, mustSet(t, 16, bx, bz)); err != nil {
				t.Fatal(err)
			}
			if !i.HasSynced() {
				t.Error("HasSynced false after a change of set")
			}
			writeConfigMap(t, e, nsY, "given-up")
			writeConfigMap(t, e, nsX, "marker")
			testenv.Eventually(t, 30*time.Second, "the marker's event", func(context.Context) (bool, error) {
				return slices.Contains(rec.since(n), "add "+nsX+"/marker"), nil
			})
			want := []string{"add " + nsX + "/marker", "add-initial " + nsZ + "/one", "add-initial " + nsZ + "/two"}
			if got := rec.since(n); !slices.Equal(got, want) {
				t.Errorf("events of the change of set: %v, want %v", got, want)
			}
			if got, want := cached(i, prefix), []string{nsX + "/marker", nsX + "/one", nsX + "/two", nsZ + "/one", nsZ + "/two"}; !slices.Equal(got, want) {
				t.Errorf("cached after the change %v, want %v", got, want)
			}
			if got := f.FilterModes()[configMaps.String()]; got != wantMode {
				t.Errorf("filter mode after the change %q, want %q", got, wantMode)
			}
		})
	}
}

// TestListKeepingLeavesOutWhatTheServerSent: on a server without the
// gate, the ListerWatcher's ListKeeping with a set's Contains returns, of
// everything the server sent, exactly the objects of the set's
// namespaces, the same Objects a whole list decodes, and the list's
// resourceVersion; and the server refuses to move an object to another
// namespace, so an object listed outside the set never belongs to it
// (its bucket never changes).
func TestListKeepingLeavesOutWhatTheServerSent(t *testing.T) {
	off := withoutGate(t)
	namespaces := stepZeroNamespaces()[:16]
	for _, ns := range namespaces {
		createNamespace(t, off, ns)
		writeConfigMap(t, off, ns, "cm")
	}
	c, err := objectclient.New(off.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := c.ListerWatcher(configMaps)
	keeping, ok := raw.(informer.KeepingLister)
	if !ok {
		t.Fatalf("objectclient's ListerWatcher (%T) is not an informer.KeepingLister", raw)
	}
	set := mustSet(t, 16, shard.Of(namespaces[0], 16), shard.Of(namespaces[5], 16))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	whole := list(t, cache.ToListerWatcherWithContext(raw), set.Selector())
	obj, err := keeping.ListKeeping(ctx, metav1.ListOptions{ShardSelector: set.Selector(), ResourceVersion: whole.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}, set.Contains)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*informer.ObjectList)
	var want []informer.Object
	for _, o := range whole.Items {
		if set.Contains(o.Namespace) {
			want = append(want, o)
		}
	}
	if len(want) == 0 || len(want) == len(whole.Items) {
		t.Fatalf("set %v holds %d of %d objects: the test needs some in and some out", set, len(want), len(whole.Items))
	}
	if !reflect.DeepEqual(got.Items, want) {
		t.Errorf("ListKeeping kept %v, want %v", keys(got.Items), keys(want))
	}
	if got.ResourceVersion != whole.ResourceVersion {
		t.Errorf("ListKeeping's resourceVersion %q, want %q", got.ResourceVersion, whole.ResourceVersion)
	}

	cm, err := off.Kube.CoreV1().ConfigMaps(namespaces[1]).Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Namespace = namespaces[0]
	if _, err := off.Kube.CoreV1().ConfigMaps(namespaces[1]).Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
		t.Errorf("the server moved %s/cm to namespace %s", namespaces[1], namespaces[0])
	}
}
