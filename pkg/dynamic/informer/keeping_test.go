package informer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// keepingServer serves a list body that no filter applied (a server
// without the ShardedListAndWatch gate) through a ListerWatcher that is a
// KeepingLister, as objectclient's is. Its body holds, besides good
// objects, an object of namespace bad whose metadata does not decode: a
// list that decodes it fails.
type keepingServer struct {
	body []byte

	mu      sync.Mutex
	keeping int // lists through ListKeeping
	whole   int // lists through ListWithContext
}

func newKeepingServer(good []string, bad string) *keepingServer {
	var items []string
	for i, key := range good {
		ns, name, _ := strings.Cut(key, "/")
		items = append(items, fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q,"resourceVersion":"%d"},"data":{"k":"v"}}`, ns, name, i+1))
	}
	items = append(items, fmt.Sprintf(`{"metadata":{"namespace":%q,"name":"broken","labels":5}}`, bad))
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMapList","metadata":{"resourceVersion":"100"},"items":[%s]}`, strings.Join(items, ","))
	return &keepingServer{body: []byte(body)}
}

type keepingListerWatcher struct{ s *keepingServer }

var _ KeepingLister = keepingListerWatcher{}

func (l keepingListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l keepingListerWatcher) ListWithContext(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	l.s.mu.Lock()
	l.s.whole++
	l.s.mu.Unlock()
	return NewObjectList(l.s.body)
}

func (l keepingListerWatcher) ListKeeping(_ context.Context, _ metav1.ListOptions, keep func(string) bool) (runtime.Object, error) {
	l.s.mu.Lock()
	l.s.keeping++
	l.s.mu.Unlock()
	return NewObjectListKeeping(l.s.body, keep)
}

func (keepingListerWatcher) Watch(metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func (keepingListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

func (s *keepingServer) listerWatcher(schema.GroupVersionResource) cache.ListerWatcher {
	return keepingListerWatcher{s}
}

func (s *keepingServer) counts() (keeping, whole int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keeping, s.whole
}

// TestShardedListsLeaveOutWhileDecoding: a sharded informer whose
// ListerWatcher is a KeepingLister lists through it, so the objects
// outside its set are never decoded (a list holding one that would not
// decode still syncs); it caches exactly the set's objects, counts what
// was left out as the server not filtering (mode client), and a change
// of set lists again with the new set. An informer without a set lists
// as before, through ListWithContext.
func TestShardedListsLeaveOutWhileDecoding(t *testing.T) {
	const bx, by, bz = 2, 7, 11
	nsX, nsY, nsZ := namespaceIn("x", bx), namespaceIn("y", by), namespaceIn("z", bz)
	good := []string{nsX + "/a", nsX + "/b", nsY + "/c", nsZ + "/d"}
	srv := newKeepingServer(good, nsZ)
	f := NewFactory(srv.listerWatcher, Options{Namespaced: namespaced})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.Hold(ctx, mustSet(t, bx)); err != nil {
		t.Fatal(err)
	}
	i := f.Acquire(configMapsGVR)
	defer i.Release()
	waitSynced(t, i)
	if got, want := cachedNames(i), []string{nsX + "/a", nsX + "/b"}; !slices.Equal(got, want) {
		t.Errorf("cached %v, want %v", got, want)
	}
	if got := f.FilterModes()[configMapsGVR.String()]; got != ModeClient {
		t.Errorf("filter mode %q after a list whose others were left out while decoding, want %q", got, ModeClient)
	}
	if keeping, whole := srv.counts(); keeping == 0 || whole != 0 {
		t.Errorf("%d lists through ListKeeping and %d through ListWithContext, want only ListKeeping", keeping, whole)
	}

	if err := f.Hold(ctx, mustSet(t, bx, by)); err != nil {
		t.Fatal(err)
	}
	if got, want := cachedNames(i), []string{nsX + "/a", nsX + "/b", nsY + "/c"}; !slices.Equal(got, want) {
		t.Errorf("cached after a change of set %v, want %v", got, want)
	}
}

// TestUnshardedListsDecodeEverything: without a set, an informer lists
// through ListWithContext, which decodes every object: the broken one
// fails the list, as it always did.
func TestUnshardedListsDecodeEverything(t *testing.T) {
	srv := newKeepingServer([]string{"a/one"}, "b")
	f := NewFactory(srv.listerWatcher, Options{})
	i := f.Acquire(configMapsGVR)
	defer i.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if keeping, whole := srv.counts(); whole > 0 {
			if keeping != 0 {
				t.Errorf("an unsharded informer listed through ListKeeping %d times", keeping)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the informer never listed")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if i.HasSynced() {
		t.Error("an unsharded informer synced from a list holding an object that does not decode")
	}
}
