package informer

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/shard"
)

// fakeServer serves one namespaced resource to a Factory: lists and
// watches from a resourceVersion, and, when filter is set, the
// shardSelector of the sets it knows, as the API server with the
// ShardedListAndWatch gate does.
type fakeServer struct {
	filter bool
	sets   map[string]shard.Set // by Selector

	mu       sync.Mutex
	rv       int
	objs     map[string]*Object
	log      []logged
	watchers []*fakeWatch
	lists    []string // the selectors of the lists served
	// failing are the selectors whose lists fail, with how many times
	// (-1: always).
	failing map[string]int
}

type logged struct {
	rv int
	ev watch.Event
}

type fakeWatch struct {
	set  *shard.Set
	ch   chan watch.Event
	once sync.Once
	stop chan struct{}
}

func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *fakeWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }

func newFakeServer(filter bool, sets ...shard.Set) *fakeServer {
	s := &fakeServer{filter: filter, sets: map[string]shard.Set{}, objs: map[string]*Object{}, failing: map[string]int{}}
	for _, set := range sets {
		s.sets[set.Selector()] = set
	}
	return s
}

func (s *fakeServer) object(ns, name string) *Object {
	o, err := NewObject(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":%q,"name":%q,"resourceVersion":"%d"}}`, ns, name, s.rv))
	if err != nil {
		panic(err)
	}
	return o
}

// write creates or updates ns/name (or deletes it) and sends the event
// to the open watches unless quiet: a quiet write is one the informers
// running now never hear of (their watch lags), which a new list sees.
func (s *fakeServer) write(ns, name string, del, quiet bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	key := ns + "/" + name
	ev := watch.Event{Type: watch.Modified}
	if del {
		ev = watch.Event{Type: watch.Deleted, Object: s.object(ns, name)}
		delete(s.objs, key)
	} else {
		if _, ok := s.objs[key]; !ok {
			ev.Type = watch.Added
		}
		ev.Object = s.object(ns, name)
		s.objs[key] = ev.Object.(*Object)
	}
	s.log = append(s.log, logged{rv: s.rv, ev: ev})
	if quiet {
		return
	}
	for _, w := range s.watchers {
		s.send(w, ev)
	}
}

func (s *fakeServer) send(w *fakeWatch, ev watch.Event) {
	if w.set != nil && !w.set.Contains(ev.Object.(*Object).Namespace) {
		return
	}
	select {
	case w.ch <- ev:
	case <-w.stop:
	}
}

func (s *fakeServer) selected(selector string) *shard.Set {
	if set, ok := s.sets[selector]; ok && s.filter {
		return &set
	}
	return nil
}

// listAndWatch is a ListWatch that lists, then watches (no watch list).
type listAndWatch struct{ *cache.ListWatch }

func (listAndWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (s *fakeServer) listerWatcher(schema.GroupVersionResource) cache.ListerWatcher {
	return listAndWatch{&cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if n := s.failing[opts.ShardSelector]; n != 0 {
				s.failing[opts.ShardSelector] = n - 1
				return nil, fmt.Errorf("list of %q fails", opts.ShardSelector)
			}
			s.lists = append(s.lists, opts.ShardSelector)
			set := s.selected(opts.ShardSelector)
			l := &ObjectList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
			if set != nil {
				l.ShardInfo = &metav1.ShardInfo{Selector: opts.ShardSelector}
			}
			for _, o := range s.objs {
				if set == nil || set.Contains(o.Namespace) {
					l.Items = append(l.Items, *o)
				}
			}
			return l, nil
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			from, _ := strconv.Atoi(opts.ResourceVersion)
			w := &fakeWatch{set: s.selected(opts.ShardSelector), ch: make(chan watch.Event, 1000), stop: make(chan struct{})}
			for _, l := range s.log {
				if l.rv > from {
					s.send(w, l.ev)
				}
			}
			s.watchers = append(s.watchers, w)
			return w, nil
		},
	}}
}

// recorder records a handler's events as "add ns/name", "add-initial
// ns/name", "update ns/name", "delete ns/name".
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, o *Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, o.Namespace+"/"+o.Name))
}

func (r *recorder) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if initial {
				r.add("add-initial %s", obj.(*Object))
			} else {
				r.add("add %s", obj.(*Object))
			}
		},
		UpdateFunc: func(_, obj any) { r.add("update %s", obj.(*Object)) },
		DeleteFunc: func(obj any) {
			if _, ok := obj.(cache.DeletedFinalStateUnknown); !ok {
				r.add("delete-not-tombstone %s", ObjectOf(obj))
				return
			}
			r.add("delete %s", ObjectOf(obj))
		},
	}
}

// since returns the events from the n-th on, sorted.
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

// waitFor polls until the recorder has had event (after the n-th).
func (r *recorder) waitFor(t *testing.T, n int, event string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.Contains(r.since(n), event), nil
	}); err != nil {
		t.Fatalf("no %q; events since: %v", event, r.since(n))
	}
}

// namespaceIn returns a namespace of bucket b of 16, named after prefix.
func namespaceIn(prefix string, b shard.Bucket) string {
	for i := 0; ; i++ {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		if shard.Of(ns, 16) == b {
			return ns
		}
	}
}

func mustSet(t *testing.T, members ...shard.Bucket) shard.Set {
	t.Helper()
	s, err := shard.NewSet(16, members...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func namespaced(schema.GroupVersionResource) bool { return true }

// TestHoldSwapsWithOnlyTheChanges: a change of set gives a handler what
// changed between the store it saw and the new one, and nothing else;
// reads and later events come from the new set alone, whether the server
// filters or not.
func TestHoldSwapsWithOnlyTheChanges(t *testing.T) {
	for _, filter := range []bool{true, false} {
		t.Run(fmt.Sprintf("server filters %v", filter), func(t *testing.T) {
			const bx, by, bz, bw = 1, 5, 9, 13
			nsX, nsY, nsZ, nsW := namespaceIn("x", bx), namespaceIn("y", by), namespaceIn("z", bz), namespaceIn("w", bw)
			set1, set2 := mustSet(t, bx, by), mustSet(t, bx, bz)
			srv := newFakeServer(filter, set1, set2)
			for _, o := range [][2]string{{nsX, "x1"}, {nsX, "x2"}, {nsX, "x3"}, {nsY, "y1"}, {nsZ, "z1"}, {nsW, "w1"}} {
				srv.write(o[0], o[1], false, false)
			}
			f := NewFactory(srv.listerWatcher, Options{Namespaced: namespaced})
			i := f.Acquire(configMapsGVR)
			defer i.Release()
			rec := &recorder{}
			if err := i.AddEventHandler(rec.handler()); err != nil {
				t.Fatal(err)
			}
			waitSynced(t, i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			// Unfiltered to set1: buckets given up raise nothing.
			n := rec.len()
			if err := f.Hold(ctx, set1); err != nil {
				t.Fatal(err)
			}
			srv.write(nsX, "x1", false, false)
			rec.waitFor(t, n, "update "+nsX+"/x1")
			if got, want := rec.since(n), []string{"update " + nsX + "/x1"}; !slices.Equal(got, want) {
				t.Errorf("events of the first swap = %v, want %v", got, want)
			}
			if got, want := cachedNames(i), []string{nsX + "/x1", nsX + "/x2", nsX + "/x3", nsY + "/y1"}; !slices.Equal(got, want) {
				t.Errorf("cached after the first swap = %v, want %v", got, want)
			}

			// Writes the running informer misses, then set1 to set2.
			srv.write(nsX, "x2", false, true)
			srv.write(nsX, "x3", true, true)
			srv.write(nsX, "x4", false, true)
			srv.write(nsZ, "z2", false, true)
			srv.write(nsY, "y2", false, true)
			n = rec.len()
			if err := f.Hold(ctx, set2); err != nil {
				t.Fatal(err)
			}
			if !i.HasSynced() {
				t.Error("HasSynced false right after a swap")
			}
			srv.write(nsX, "x1", false, false) // the marker: after every change
			srv.write(nsY, "y3", false, false) // of a bucket given up
			rec.waitFor(t, n, "update "+nsX+"/x1")
			want := []string{
				"add " + nsX + "/x4",
				"add-initial " + nsZ + "/z1",
				"add-initial " + nsZ + "/z2",
				"delete " + nsX + "/x3",
				"update " + nsX + "/x1",
				"update " + nsX + "/x2",
			}
			if got := rec.since(n); !slices.Equal(got, want) {
				t.Errorf("events of the second swap = %v, want %v", got, want)
			}
			if got, want := cachedNames(i), []string{nsX + "/x1", nsX + "/x2", nsX + "/x4", nsZ + "/z1", nsZ + "/z2"}; !slices.Equal(got, want) {
				t.Errorf("cached after the second swap = %v, want %v", got, want)
			}
			wantMode := ModeClient
			if filter {
				wantMode = ModeServer
			}
			if got := f.FilterModes()[configMapsGVR.String()]; got != wantMode {
				t.Errorf("filter mode = %q, want %q", got, wantMode)
			}
			if got := srv.lists; !slices.Equal(got, []string{"", set1.Selector(), set2.Selector()}) {
				t.Errorf("lists' selectors = %q", got)
			}
		})
	}
}

func cachedNames(i *Informer) []string {
	var out []string
	for _, o := range i.ListMeta("", nil) {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	slices.Sort(out)
	return out
}

// TestHoldLeavesWholeAndClusterScopedInformers: whole informers and those
// of cluster-scoped resources keep every object and list without a
// selector; an empty set holds nothing and sends no request.
func TestHoldLeavesWholeAndClusterScopedInformers(t *testing.T) {
	nsA, nsB := namespaceIn("a", 2), namespaceIn("b", 7)
	set := mustSet(t, 2)
	srv := newFakeServer(true, set)
	srv.write(nsA, "a1", false, false)
	srv.write(nsB, "b1", false, false)
	clusterGVR := schema.GroupVersionResource{Group: "test", Version: "v1", Resource: "clusterthings"}
	f := NewFactory(srv.listerWatcher, Options{Namespaced: func(gvr schema.GroupVersionResource) bool { return gvr != clusterGVR }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Hold(ctx, set); err != nil {
		t.Fatal(err)
	}
	sharded, whole, cluster := f.Acquire(configMapsGVR), f.AcquireWhole(configMapsGVR), f.Acquire(clusterGVR)
	for _, i := range []*Informer{sharded, whole, cluster} {
		defer i.Release()
		waitSynced(t, i)
	}
	if sharded.shared == whole.shared {
		t.Fatal("AcquireWhole shares the sharded informer")
	}
	if got, want := cachedNames(sharded), []string{nsA + "/a1"}; !slices.Equal(got, want) {
		t.Errorf("sharded informer caches %v, want %v", got, want)
	}
	all := []string{nsA + "/a1", nsB + "/b1"}
	if got := cachedNames(whole); !slices.Equal(got, all) {
		t.Errorf("whole informer caches %v, want %v", got, all)
	}
	if got := cachedNames(cluster); !slices.Equal(got, all) {
		t.Errorf("cluster-scoped informer caches %v, want %v", got, all)
	}
	if got := f.FilterModes(); len(got) != 1 || got[configMapsGVR.String()] != ModeServer {
		t.Errorf("filter modes = %v, want only %s: server", got, configMapsGVR)
	}
	if got, want := f.BucketCounts(), map[int]int{2: 1}; !maps.Equal(got, want) {
		t.Errorf("objects per bucket = %v, want %v (the whole informer's left out)", got, want)
	}
	if got := f.AcquireWhole(clusterGVR); got.shared != cluster.shared {
		t.Error("AcquireWhole of a cluster-scoped resource is another informer")
	} else {
		got.Release()
	}

	rec := &recorder{}
	if err := sharded.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, sharded)
	srv.mu.Lock()
	lists := len(srv.lists)
	srv.mu.Unlock()
	n := rec.len()
	if err := f.Hold(ctx, mustSet(t)); err != nil {
		t.Fatal(err)
	}
	if got := cachedNames(sharded); len(got) != 0 {
		t.Errorf("an informer of the empty set caches %v", got)
	}
	srv.mu.Lock()
	if len(srv.lists) != lists {
		t.Errorf("the empty set listed: %q", srv.lists[lists:])
	}
	srv.mu.Unlock()
	srv.write(nsA, "a2", false, false)
	srv.write(nsA, "a1", false, false)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok := whole.GetMeta(nsA, "a2")
		return ok, nil
	}); err != nil {
		t.Fatal("the whole informer never had a2")
	}
	if got := rec.since(n); len(got) != 0 {
		t.Errorf("events after giving every bucket up = %v, want none", got)
	}
}

// TestHoldAfterFailedLists: a new set's list that fails is retried (the
// gate opens only after a list), and the handler of an informer that never
// synced gets the new set's objects as initial adds.
func TestHoldAfterFailedLists(t *testing.T) {
	nsA, nsB := namespaceIn("a", 2), namespaceIn("b", 7)
	set := mustSet(t, 2)
	srv := newFakeServer(true, set)
	srv.write(nsA, "a1", false, false)
	srv.write(nsB, "b1", false, false)
	srv.failing[""] = -1
	srv.failing[set.Selector()] = 1
	f := NewFactory(srv.listerWatcher, Options{Namespaced: namespaced})
	i := f.Acquire(configMapsGVR)
	defer i.Release()
	rec := &recorder{}
	if err := i.AddEventHandler(rec.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Hold(ctx, set); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, i)
	if got, want := rec.since(0), []string{"add-initial " + nsA + "/a1"}; !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// TestHoldKeepsEachHandlersOrder: a slow handler still behind on the old
// set's events at a swap gets them all, then the swap's changes, then the
// new set's events, from one goroutine at a time.
func TestHoldKeepsEachHandlersOrder(t *testing.T) {
	const bx, bz = 4, 11
	nsX, nsZ := namespaceIn("x", bx), namespaceIn("z", bz)
	set1, set2 := mustSet(t, bx), mustSet(t, bx, bz)
	srv := newFakeServer(true, set1, set2)
	srv.write(nsX, "x1", false, false)
	srv.write(nsZ, "z1", false, false)
	f := NewFactory(srv.listerWatcher, Options{Namespaced: namespaced})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Hold(ctx, set1); err != nil {
		t.Fatal(err)
	}
	i := f.Acquire(configMapsGVR)
	defer i.Release()
	var (
		mu      sync.Mutex
		events  []string
		inside  int
		unblock = make(chan struct{})
		blocked = make(chan struct{})
	)
	record := func(e string) {
		mu.Lock()
		inside++
		if inside > 1 {
			events = append(events, "concurrent!")
		}
		mu.Unlock()
		if e == "update "+nsX+"/x1@3" {
			close(blocked)
			<-unblock
		}
		mu.Lock()
		inside--
		events = append(events, e)
		mu.Unlock()
	}
	if err := i.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			o := obj.(*Object)
			record(fmt.Sprintf("add %s/%s initial=%v", o.Namespace, o.Name, initial))
		},
		UpdateFunc: func(_, obj any) {
			o := obj.(*Object)
			record(fmt.Sprintf("update %s/%s@%s", o.Namespace, o.Name, o.ResourceVersion))
		},
	}); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, i)
	srv.write(nsX, "x1", false, false) // @3: the handler blocks in it
	srv.write(nsX, "x1", false, false) // @4: pending behind @3
	<-blocked
	srv.write(nsX, "x2", false, true) // @5, that the old set never sees
	if err := f.Hold(ctx, set2); err != nil {
		t.Fatal(err)
	}
	srv.write(nsX, "x1", false, false) // @6, of the new set
	close(unblock)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(events) >= 6, nil
	}); err != nil {
		t.Fatal("too few events")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 6 {
		t.Fatalf("events = %q, want 6", events)
	}
	changes := slices.Sorted(slices.Values(events[3:5]))
	if !slices.Equal(events[:3], []string{"add " + nsX + "/x1 initial=true", "update " + nsX + "/x1@3", "update " + nsX + "/x1@4"}) ||
		!slices.Equal(changes, []string{"add " + nsX + "/x2 initial=false", "add " + nsZ + "/z1 initial=true"}) ||
		events[5] != "update "+nsX+"/x1@6" {
		t.Errorf("events = %q, want the old set's, then the swap's, then the new set's", events)
	}
}

// TestWatchEventsCountWhatTheServerSent: WatchEvents counts every watch
// event received, those a sharded informer then drops included (a server
// that does not filter), and not those a server that filters never sends.
func TestWatchEventsCountWhatTheServerSent(t *testing.T) {
	for _, filter := range []bool{true, false} {
		t.Run(fmt.Sprintf("server filters %v", filter), func(t *testing.T) {
			const bx, by = 1, 5
			nsX, nsY := namespaceIn("x", bx), namespaceIn("y", by)
			set := mustSet(t, bx)
			srv := newFakeServer(filter, set)
			f := NewFactory(srv.listerWatcher, Options{Namespaced: namespaced})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := f.Hold(ctx, set); err != nil {
				t.Fatal(err)
			}
			i := f.Acquire(configMapsGVR)
			defer i.Release()
			rec := &recorder{}
			if err := i.AddEventHandler(rec.handler()); err != nil {
				t.Fatal(err)
			}
			waitSynced(t, i)
			n := rec.len()
			srv.write(nsY, "y1", false, false) // another bucket's
			srv.write(nsX, "x1", false, false)
			rec.waitFor(t, n, "add "+nsX+"/x1")
			want := int64(1)
			if !filter {
				want = 2 // y1 came too, and was dropped
			}
			if got := f.WatchEvents()[configMapsGVR.String()]; got != want {
				t.Errorf("WatchEvents = %d, want %d", got, want)
			}
			if got := rec.since(n); !slices.Equal(got, []string{"add " + nsX + "/x1"}) {
				t.Errorf("handler events %v, want only the add of x1", got)
			}
		})
	}
}
