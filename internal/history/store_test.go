package history

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/trigger"
)

// typical returns a typical record: a trigger, two hook calls, three writes,
// each string allocated on its own as a real sync's are.
func typical(i int) *Sync {
	s := &Sync{Start: time.Now(), Duration: time.Millisecond}
	s.Triggers = append(s.Triggers, trigger.Trigger{Cause: trigger.CauseDependent, Object: fmt.Sprintf("configmaps/ns-%d/child-%d", i, i)})
	for range 2 {
		s.AddCall(Call{Hook: "sync", Start: time.Now(), Duration: time.Millisecond, Result: fmt.Sprint(200)})
	}
	for j := range 3 {
		s.AddWrite(Write{Verb: "update", Target: "child", Object: fmt.Sprintf("configmaps/ns-%d/child-%d-%d", i, i, j)})
	}
	s.Outcome = Outcome{Result: "error", Error: fmt.Sprintf("sync hook: HTTP 500 Internal Server Error: %q", strings.Repeat("x", 100+i%50)), Attempt: 3, NextAttempt: time.Now()}
	return s
}

// TestStoreKeepsTheLastSyncsOfEachObject: newest first, at most
// SyncsPerObject; Forget drops them.
func TestStoreKeepsTheLastSyncsOfEachObject(t *testing.T) {
	st := NewStore(StoreOptions{SyncsPerObject: 3})
	var all []*Sync
	for i := range 5 {
		s := typical(i)
		all = append(all, s)
		st.Put("compositecontroller/c", "ns/p", s)
	}
	got := st.Get("compositecontroller/c", "ns/p")
	if len(got) != 3 || got[0] != all[4] || got[2] != all[2] {
		t.Errorf("kept %d syncs, want the last 3 newest first", len(got))
	}
	if st.Get("decoratorcontroller/c", "ns/p") != nil {
		t.Error("a controller of another kind with the same name shares the record")
	}
	want := st.overhead + alloc(len("compositecontroller/c")) + alloc(len("ns/p")) + all[2].Size() + all[3].Size() + all[4].Size()
	if st.bytesUsed() != want {
		t.Errorf("Bytes() = %d, want %d (the object and its 3 syncs)", st.bytesUsed(), want)
	}
	st.Forget("compositecontroller/c", "ns/p")
	if st.Get("compositecontroller/c", "ns/p") != nil || st.bytesUsed() != 0 || st.objectCount() != 0 {
		t.Errorf("after Forget: %d objects, %d bytes", st.objectCount(), st.bytesUsed())
	}
}

// TestStoreEvictsTheObjectsSyncedLongestAgo: past MaxBytes, the objects
// whose last sync is oldest go first, whole; the budget holds after every
// Put, and the gauge and the eviction counter follow.
func TestStoreEvictsTheObjectsSyncedLongestAgo(t *testing.T) {
	one := NewStore(StoreOptions{}).overhead + alloc(len("c")) + alloc(len("ns/p0")) + typical(0).Size()
	st := NewStore(StoreOptions{MaxBytes: 3*one + one/2}) // room for 3 objects of one sync
	bytesBefore := testutil.ToFloat64(metrics.HistoryBytes)
	evictionsBefore := testutil.ToFloat64(metrics.HistoryEvictions)
	for i := range 3 {
		st.Put("c", fmt.Sprint("ns/p", i), typical(0))
	}
	st.Put("c", "ns/p0", typical(0)) // p0 synced again: p1 is now the oldest
	if st.objectCount() != 2 || st.Get("c", "ns/p1") != nil {
		t.Fatalf("after a second sync of p0 over budget: %d objects, p1 kept: %v; want p1 evicted", st.objectCount(), st.Get("c", "ns/p1") != nil)
	}
	st.Put("c", "ns/p3", typical(0))
	for key, want := range map[string]int{"ns/p0": 2, "ns/p1": 0, "ns/p2": 0, "ns/p3": 1} {
		if got := len(st.Get("c", key)); got != want {
			t.Errorf("%s: %d syncs kept, want %d", key, got, want)
		}
	}
	if st.bytesUsed() > 3*one+one/2 {
		t.Errorf("Bytes() = %d, over the budget %d", st.bytesUsed(), 3*one+one/2)
	}
	if got := testutil.ToFloat64(metrics.HistoryBytes) - bytesBefore; got != float64(st.bytesUsed()) {
		t.Errorf("metactl_history_bytes rose by %v, want %d", got, st.bytesUsed())
	}
	if got := testutil.ToFloat64(metrics.HistoryEvictions) - evictionsBefore; got != 2 {
		t.Errorf("metactl_history_evictions_total rose by %v, want 2", got)
	}

	// An object alone over the budget keeps its last sync only, or none.
	small := NewStore(StoreOptions{MaxBytes: one + one/2})
	small.Put("c", "ns/p0", typical(0))
	small.Put("c", "ns/p0", typical(0))
	if n := len(small.Get("c", "ns/p0")); n != 1 || small.bytesUsed() > one+one/2 {
		t.Errorf("an object over the budget kept %d syncs in %d bytes, want 1 within %d", n, small.bytesUsed(), one+one/2)
	}
}

// succeeding is a typical record of a sync that succeeded.
func succeeding(i int) *Sync {
	s := typical(i)
	s.Outcome = Outcome{Result: "success"}
	return s
}

// TestStoreEvictsSucceededObjectsFirst: past the budget, the objects
// whose newest sync succeeded go before a failing one synced longer ago:
// a wave of no-op syncs does not push a failing object out between its
// retries. One that recovers is evicted like the others again.
func TestStoreEvictsSucceededObjectsFirst(t *testing.T) {
	one := NewStore(StoreOptions{}).overhead + alloc(len("c")) + alloc(len("ns/p0")) + typical(0).Size()
	st := NewStore(StoreOptions{MaxBytes: 3*one + one/2})
	st.Put("c", "ns/failing", typical(0))
	for i := range 5 {
		st.Put("c", fmt.Sprint("ns/p", i), succeeding(0))
	}
	if st.Get("c", "ns/failing") == nil {
		t.Error("the failing object was evicted by objects whose syncs succeeded")
	}
	for key, want := range map[string]bool{"ns/p0": false, "ns/p1": false, "ns/p2": false, "ns/p3": true, "ns/p4": true} {
		if got := st.Get("c", key) != nil; got != want {
			t.Errorf("%s kept: %v, want %v", key, got, want)
		}
	}
	if st.bytesUsed() > 3*one+one/2 {
		t.Errorf("%d bytes, over the budget %d", st.bytesUsed(), 3*one+one/2)
	}
	st.Put("c", "ns/failing", succeeding(0)) // recovered
	for i := 5; i < 8; i++ {
		st.Put("c", fmt.Sprint("ns/p", i), succeeding(0))
	}
	if st.Get("c", "ns/failing") != nil {
		t.Error("a recovered object synced longest ago was kept")
	}
}

// TestStoreKeepsTheLastFailure: an object's last failed sync stays after
// more syncs than the window holds have followed it, listed last; a newer
// failure replaces it.
func TestStoreKeepsTheLastFailure(t *testing.T) {
	st := NewStore(StoreOptions{SyncsPerObject: 3})
	failed := typical(0)
	st.Put("c", "ns/p", failed)
	var last *Sync
	for range 5 {
		last = succeeding(0)
		st.Put("c", "ns/p", last)
	}
	got := st.Get("c", "ns/p")
	if len(got) != 4 || got[0] != last || got[3] != failed {
		t.Fatalf("kept %d syncs (last failure kept: %v), want the 3 newest and the failure last", len(got), slices.Contains(got, failed))
	}
	want := st.overhead + alloc(len("c")) + alloc(len("ns/p")) + 3*last.Size() + failed.Size()
	if st.bytesUsed() != want {
		t.Errorf("%d bytes, want %d (the failure counted)", st.bytesUsed(), want)
	}
	again := typical(1)
	st.Put("c", "ns/p", again)
	if got := st.Get("c", "ns/p"); len(got) != 3 || got[0] != again || slices.Contains(got, failed) {
		t.Errorf("after a newer failure: %d syncs, the older failure kept: %v; want the window only", len(got), slices.Contains(got, failed))
	}
}

// TestSizeBoundsTheHeap: the estimate of a record is at least the heap it
// holds, and not wildly more.
func TestSizeBoundsTheHeap(t *testing.T) {
	const n = 5000
	st := NewStore(StoreOptions{MaxBytes: 1 << 40, SyncsPerObject: 1})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("ns/p", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		st.Put("compositecontroller/c", keys[i], typical(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	estimate := st.bytesUsed() - int64(n)*alloc(len("ns/p1000")) // the keys were allocated before
	t.Logf("%d syncs: heap %d bytes (%d each), estimate %d (%d each)", n, heap, heap/n, estimate, estimate/n)
	if estimate < heap {
		t.Errorf("the estimate %d is below the heap %d the record holds", estimate, heap)
	}
	if estimate > 3*heap {
		t.Errorf("the estimate %d is over 3 times the heap %d the record holds", estimate, heap)
	}
	runtime.KeepAlive(st)
}

// TestCutBoundsErrors: error texts are kept to MaxErrorBytes.
func TestCutBoundsErrors(t *testing.T) {
	s := &Sync{}
	s.AddCall(Call{Error: strings.Repeat("é", MaxErrorBytes)})
	if got := s.Calls[0].Error; len(got) > MaxErrorBytes || !strings.HasSuffix(got, "...") {
		t.Errorf("a long error kept as %d bytes, want at most %d ending in ...", len(got), MaxErrorBytes)
	}
	if Cut("short") != "short" {
		t.Error("a short error was cut")
	}
}

// BenchmarkPut is the cost the record adds to a sync: the Store's Put of
// a typical record, over 10,000 objects within the default budget.
func BenchmarkPut(b *testing.B) {
	st := NewStore(StoreOptions{})
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprint("ns/p", i)
	}
	syncs := make([]*Sync, 64)
	for i := range syncs {
		syncs[i] = typical(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		st.Put("compositecontroller/c", keys[i%len(keys)], syncs[i%len(syncs)])
	}
}

// TestStoreBoundsEachObjectByBytes: by default an object keeps its last
// DefaultSyncsPerObject syncs, fewer when they exceed MaxBytesPerObject,
// never fewer than its newest.
func TestStoreBoundsEachObjectByBytes(t *testing.T) {
	st := NewStore(StoreOptions{})
	for i := range DefaultSyncsPerObject + 5 {
		st.Put("compositecontroller/c", "ns/p", typical(i))
	}
	if got := len(st.Get("compositecontroller/c", "ns/p")); got != DefaultSyncsPerObject {
		t.Errorf("kept %d typical syncs by default, want %d", got, DefaultSyncsPerObject)
	}
	one := typical(0).Size()
	st = NewStore(StoreOptions{MaxBytesPerObject: 3*one + one/2})
	for i := range 10 {
		st.Put("compositecontroller/c", "ns/p", typical(i))
	}
	if got := len(st.Get("compositecontroller/c", "ns/p")); got < 2 || got > 3 {
		t.Errorf("kept %d syncs within %d bytes of about %d each, want 2 or 3", got, 3*one+one/2, one)
	}
	st = NewStore(StoreOptions{MaxBytesPerObject: 1})
	st.Put("compositecontroller/c", "ns/p", typical(0))
	if got := len(st.Get("compositecontroller/c", "ns/p")); got != 1 {
		t.Errorf("kept %d syncs of an object over its budget, want its newest", got)
	}
}
