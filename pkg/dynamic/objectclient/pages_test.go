package objectclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/shard"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// pagingServer serves ConfigMaps in two pages when a list has a limit
// (as kube-apiserver does from etcd, or from the watch cache for
// resourceVersion ""), and, when expire is set, answers the second
// page's continue token with 410 Gone (Expired), as kube-apiserver does
// once the token's revision is compacted. It records each list's limit
// and continue token.
type pagingServer struct {
	items  []string
	expire bool

	mu    sync.Mutex
	lists []string
}

func (s *pagingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	q := r.URL.Query()
	if q.Get("watch") == "true" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	s.mu.Lock()
	s.lists = append(s.lists, fmt.Sprintf("limit=%s continue=%s", q.Get("limit"), q.Get("continue")))
	s.mu.Unlock()
	half := len(s.items) / 2
	items, cont := s.items, ""
	switch {
	case q.Get("continue") == "c1" && s.expire:
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old","reason":"Expired","code":410}`))
		return
	case q.Get("continue") == "c1":
		items = s.items[half:]
	case q.Get("limit") != "":
		items, cont = s.items[:half], "c1"
	}
	fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"50","continue":%q},"items":[%s]}`, cont, strings.Join(items, ","))
}

func (s *pagingServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lists)
}

// TestShardedListsKeepThePagersWays: a sharded informer in client mode
// lists through the reflector's pager as before: pages are read one by
// one, each keeping the set's objects, and a continue token the server
// says expired makes the pager list again whole (limit 0), whose set's
// objects the cache then holds, in mode client.
func TestShardedListsKeepThePagersWays(t *testing.T) {
	namespace := func(i int) string { return fmt.Sprintf("%c%c-team", 'a'+i%26, 'a'+i%7) }
	set, err := shard.NewSet(16, shard.Of(namespace(0), 16), shard.Of(namespace(1), 16))
	if err != nil {
		t.Fatal(err)
	}
	var items, want []string
	for i := range 40 {
		ns := namespace(i)
		items = append(items, fmt.Sprintf(`{"metadata":{"namespace":%q,"name":"cm-%d","resourceVersion":"%d"}}`, ns, i, i+1))
		if set.Contains(ns) {
			want = append(want, fmt.Sprintf("%s/cm-%d", ns, i))
		}
	}
	slices.Sort(want)
	if len(want) == 0 || len(want) == len(items) {
		t.Fatalf("set %v holds %d of %d objects: the test needs some in and some out", set, len(want), len(items))
	}
	for _, expire := range []bool{false, true} {
		t.Run(fmt.Sprintf("continue expires %v", expire), func(t *testing.T) {
			srv := &pagingServer{items: items, expire: expire}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			c, err := objectclient.New(&rest.Config{Host: hs.URL}, nil)
			if err != nil {
				t.Fatal(err)
			}
			f := informer.NewFactory(c.ListerWatcher, informer.Options{Namespaced: func(schema.GroupVersionResource) bool { return true }})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := f.Hold(ctx, set); err != nil {
				t.Fatal(err)
			}
			i := f.Acquire(benchConfigMaps)
			defer i.Release()
			for !i.HasSynced() {
				select {
				case <-ctx.Done():
					t.Fatalf("never synced; lists %v", srv.requests())
				case <-time.After(10 * time.Millisecond):
				}
			}
			var got []string
			for _, o := range i.ListMeta("", nil) {
				got = append(got, o.Namespace+"/"+o.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("cached %v, want %v", got, want)
			}
			wantLists := []string{"limit=500 continue=", "limit=500 continue=c1"}
			if expire {
				wantLists = append(wantLists, "limit= continue=")
			}
			if got := srv.requests(); !slices.Equal(got, wantLists) {
				t.Errorf("lists %q, want %q", got, wantLists)
			}
			if mode := f.FilterModes()[benchConfigMaps.String()]; mode != informer.ModeClient {
				t.Errorf("filter mode %q, want %q", mode, informer.ModeClient)
			}
		})
	}
}
