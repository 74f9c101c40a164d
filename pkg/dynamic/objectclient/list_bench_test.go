package objectclient_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/metactl/metactl/internal/shard"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

var benchConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// benchListBody is a ConfigMapList as kube-apiserver sends it to metactl
// in the sharding benchmark (test/bench): n children of BenchParents
// spread over namespaces named as test/bench names them, each with its
// controller owner, metactl's apply entry in managedFields and one data
// key.
func benchListBody(n, namespaces int) []byte {
	var b strings.Builder
	b.WriteString(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"900000"},"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		h := fnv.New32a()
		fmt.Fprintf(h, "metactl-bench-namespace-%d", (i/3)%namespaces)
		ns := fmt.Sprintf("bench-%08x", h.Sum32())
		parent := fmt.Sprintf("p-%d", i/3)
		fmt.Fprintf(&b, `{"metadata":{"name":"%s-%d","namespace":%q,"uid":"%08x-1c2d-4e5f-8a9b-%012x","resourceVersion":"%d",`+
			`"creationTimestamp":"2026-11-27T10:00:00Z","labels":{"bench.metactl.io/parent":%q},`+
			`"ownerReferences":[{"apiVersion":"bench.metactl.io/v1","kind":"BenchParent","name":%q,"uid":"%08x-aaaa-4bbb-8ccc-%012x","controller":true,"blockOwnerDeletion":true}],`+
			`"managedFields":[{"manager":"metactl/benchparents","operation":"Apply","apiVersion":"v1","time":"2026-11-27T10:00:00Z","fieldsType":"FieldsV1",`+
			`"fieldsV1":{"f:data":{"f:value":{}},"f:metadata":{"f:labels":{"f:bench.metactl.io/parent":{}},"f:ownerReferences":{"k:{\"uid\":\"%08x-aaaa-4bbb-8ccc-%012x\"}":{}}}}}]},`+
			`"data":{"value":"v-%d"}}`,
			parent, i%3, ns, i, i, 100000+i, parent, parent, i/3, i/3, i/3, i/3, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// listServer serves body to every list of ConfigMaps and holds every
// watch open until its request ends.
func listServer(body []byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = w.Write(body)
	}))
}

// decodeWhole hides ListKeeping: the informer lists as before issue 31's
// client-mode change, decoding every item, then dropping those outside
// its set.
type decodeWhole struct {
	lw cache.ListerWatcherWithContext
}

func (d decodeWhole) List(opts metav1.ListOptions) (kruntime.Object, error) {
	return d.lw.ListWithContext(context.Background(), opts)
}

func (d decodeWhole) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return d.lw.WatchWithContext(context.Background(), opts)
}

func (d decodeWhole) ListWithContext(ctx context.Context, opts metav1.ListOptions) (kruntime.Object, error) {
	return d.lw.ListWithContext(ctx, opts)
}

func (d decodeWhole) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return d.lw.WatchWithContext(ctx, opts)
}

// keepWholeBody is ListKeeping as it was before the list was read as a
// stream: the whole response read, then the items outside the set left
// out while decoding (informer.NewObjectListKeeping).
type keepWholeBody struct {
	decodeWhole
	url string
}

func (k keepWholeBody) ListKeeping(ctx context.Context, _ metav1.ListOptions, keep func(string) bool) (kruntime.Object, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url+"/api/v1/configmaps", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return informer.NewObjectListKeeping(data, keep)
}

// heapPeak samples the heap's objects (runtime/metrics) every 100µs until
// stopped, and returns the largest sample.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

func heapObjects() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// BenchmarkShardedListClientMode: a sharded informer holding 8 of 32
// buckets lists 40,000 ConfigMaps of 100 namespaces from a server that
// does not filter (client mode), through objectclient as metactl does:
// "decode-whole" decodes every item and then drops the others (before
// issue 31's change), "keep-whole-body" reads the whole response and
// leaves them out before decoding them, "keep-while-decoding" (metactl's
// list) does so reading the response as a stream. It reports, per list, the heap's peak above the heap
// before the list (sampled every 100µs, garbage not yet collected
// included, as the process's memory sees it), the heap the cache keeps
// after a GC, and the objects kept.
//
//	go test ./pkg/dynamic/objectclient/ -run '^$' -bench ShardedListClientMode -benchtime 1x -count 3
func BenchmarkShardedListClientMode(b *testing.B) {
	const n, namespaces, buckets = 40000, 100, 32
	body := benchListBody(n, namespaces)
	srv := listServer(body)
	defer srv.Close()
	set, err := shard.NewSet(buckets, 0, 4, 8, 12, 16, 20, 24, 28)
	if err != nil {
		b.Fatal(err)
	}
	c, err := objectclient.New(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("list body: %d bytes, %d ConfigMaps in %d namespaces; set %v", len(body), n, namespaces, set)
	for _, variant := range []struct {
		name string
		lw   informer.ListerWatcherFunc
	}{
		{"decode-whole", func(gvr schema.GroupVersionResource) cache.ListerWatcher {
			return decodeWhole{cache.ToListerWatcherWithContext(c.ListerWatcher(gvr))}
		}},
		{"keep-whole-body", func(gvr schema.GroupVersionResource) cache.ListerWatcher {
			return keepWholeBody{decodeWhole{cache.ToListerWatcherWithContext(c.ListerWatcher(gvr))}, srv.URL}
		}},
		{"keep-while-decoding", c.ListerWatcher},
	} {
		b.Run(variant.name, func(b *testing.B) {
			var peak, kept, retained uint64
			for range b.N {
				base := heapObjects()
				stop := heapPeak()
				f := informer.NewFactory(variant.lw, informer.Options{Namespaced: func(schema.GroupVersionResource) bool { return true }})
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				if err := f.Hold(ctx, set); err != nil {
					b.Fatal(err)
				}
				i := f.Acquire(benchConfigMaps)
				for !i.HasSynced() {
					if ctx.Err() != nil {
						b.Fatal("the informer never synced")
					}
					time.Sleep(time.Millisecond)
				}
				cancel()
				peak += stop() - base
				kept += uint64(len(i.ListMeta("", nil)))
				retained += heapObjects() - base
				if mode := f.FilterModes()[benchConfigMaps.String()]; mode != informer.ModeClient {
					b.Fatalf("filter mode %q, want %q", mode, informer.ModeClient)
				}
				i.Release()
			}
			b.ReportMetric(float64(peak)/float64(b.N)/(1<<20), "peak-heap-MiB/op")
			b.ReportMetric(float64(retained)/float64(b.N)/(1<<20), "retained-heap-MiB/op")
			b.ReportMetric(float64(kept)/float64(b.N), "kept-objects/op")
		})
	}
}
