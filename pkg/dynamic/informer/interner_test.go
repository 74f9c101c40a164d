package informer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unique"
	"unsafe"
)

// TestInternedStringsOutliveGC: a string the cache interned is shared with
// the objects decoded after a garbage collection, as long as an object
// holds it. unique.Make(s).Value() does not do this: once no Handle is
// held, a collection drops its entry, and the next Make of the same bytes
// returns a new copy (issue 30; see interner).
func TestInternedStringsOutliveGC(t *testing.T) {
	key := fmt.Sprintf("outlives-gc.metactl.io/%p", t)
	held := interned.internBytes([]byte(key)) // as a cached object holds it
	runtime.GC()
	runtime.GC()
	if again := interned.internBytes([]byte(key)); again != key || unsafe.StringData(again) != unsafe.StringData(held) {
		t.Errorf("internBytes after two collections returned a new copy of %q", key)
	}
	if again := interned.intern(strings.Clone(key)); again != key || unsafe.StringData(again) != unsafe.StringData(held) {
		t.Errorf("intern after two collections returned a new copy of %q", key)
	}
}

// uniqueTable is the standard library's unique.Make as a stringTable,
// keeping only the strings (Value), not the Handles: what the cache's
// types (Pairs, ObjectMeta's strings) could hold without changing.
type uniqueTable struct{}

func (uniqueTable) intern(s string) string {
	if s == "" || len(s) > internMax {
		return s
	}
	return unique.Make(s).Value()
}

func (uniqueTable) internBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > internMax {
		return string(b)
	}
	return unique.Make(string(b)).Value()
}

// Shape of BenchmarkRetainedBytesPerObject's objects.
const (
	retainedObjects    = 10000 // cached ConfigMaps
	retainedNamespaces = 100
	retainedChildren   = 3 // ConfigMaps per owner, as test/bench's hook asks
)

// cachedChildJSON appends to buf the i-th ConfigMap as the API server
// sends test/bench's children (see test/bench's childObject): the hook's
// data, the controller-uid label and the controller reference of its
// parent (shared by retainedChildren ConfigMaps in a row), the
// last-applied annotation, the server's fields and a managedFields entry;
// in one of retainedNamespaces namespaces.
func cachedChildJSON(buf []byte, i int) []byte {
	p := i / retainedChildren
	parent := fmt.Sprintf("p-%05d", p)
	name := fmt.Sprintf("%s-%d", parent, i%retainedChildren)
	ns := fmt.Sprintf("bench-%03d", p%retainedNamespaces)
	parentUID := fmt.Sprintf("%08x-5e1f-4c4b-9a55-%012x", p*2654435761%(1<<32), p)
	value := fmt.Sprintf("create-%d", p)
	lastApplied := fmt.Sprintf(`{"apiVersion":"v1","data":{"value":%q},"kind":"ConfigMap","metadata":{"labels":{"controller-uid":%q},"name":%q,"namespace":%q,"ownerReferences":[{"apiVersion":"bench.metactl.io/v1","blockOwnerDeletion":true,"controller":true,"kind":"BenchParent","name":%q,"uid":%q}]}}`,
		value, parentUID, name, ns, parent, parentUID)
	escaped := strings.ReplaceAll(lastApplied, `"`, `\"`)
	return fmt.Appendf(buf, `{"apiVersion":"v1","data":{"value":%q},"kind":"ConfigMap","metadata":{`+
		`"annotations":{"metacontroller.k8s.io/last-applied-configuration":"%s"},`+
		`"creationTimestamp":"2026-11-27T14:00:00Z","labels":{"controller-uid":%q},`+
		`"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:value":{}},"f:metadata":{"f:annotations":{".":{},"f:metacontroller.k8s.io/last-applied-configuration":{}},"f:labels":{".":{},"f:controller-uid":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"%s\"}":{}}}},"manager":"metactl","operation":"Update","time":"2026-11-27T14:00:00Z"}],`+
		`"name":%q,"namespace":%q,`+
		`"ownerReferences":[{"apiVersion":"bench.metactl.io/v1","blockOwnerDeletion":true,"controller":true,"kind":"BenchParent","name":%q,"uid":%q}],`+
		`"resourceVersion":"%d","uid":"%08x-0c0f-4f6e-8d3a-%012x"}}`,
		value, escaped, parentUID, parentUID, name, ns, parent, parentUID, 100000+i, i*2246822519%(1<<32), i)
}

// BenchmarkRetainedBytesPerObject is the memory the cache keeps per
// object with the interner (interner) and with unique.Make(s).Value() in
// its place (unique). It decodes retainedObjects ConfigMaps shaped like
// test/bench's children through NewObject, as the cache does, keeping
// them all and collecting every gc-every objects: 1,000 as a process
// collects while it fills its cache from a list; 10 and 1 as objects
// that arrive a few at a time, by watch events over a long run, are each
// decoded in a collection cycle of their own or nearly. Then it collects
// and reports the heap in use (heap-inuse-B/obj, what docs/performance.md's
// "bytes per cached object" counts) and the live heap (live-B/obj) per
// object, above what they were before. Both include the table's own
// memory. The variants run interleaved, e.g. -bench RetainedBytes -count 3
// (issue 30); gc-every-1 takes 20 s or more a round on 2 cores.
func BenchmarkRetainedBytesPerObject(b *testing.B) {
	tables := []struct {
		name string
		new  func() stringTable
	}{
		{"interner", func() stringTable { return &interner{max: internMaxEntries} }},
		{"unique", func() stringTable { return uniqueTable{} }},
	}
	for _, gcEvery := range []int{1000, 10, 1} {
		for _, table := range tables {
			b.Run(fmt.Sprintf("gc-every-%d/%s", gcEvery, table.name), func(b *testing.B) {
				retainedBytesPerObject(b, gcEvery, table.new)
			})
		}
	}
}

func retainedBytesPerObject(b *testing.B, gcEvery int, newTable func() stringTable) {
	defer func(t stringTable) { interned = t }(interned)
	var inuse, live float64
	rounds := 0
	for b.Loop() {
		rounds++
		interned = nil // the previous round's table is garbage
		objs := make([]*Object, 0, retainedObjects)
		buf := make([]byte, 0, 4096)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		interned = newTable()
		for i := range retainedObjects {
			if i%gcEvery == 0 {
				runtime.GC()
			}
			buf = cachedChildJSON(buf[:0], i)
			o, err := NewObject(buf)
			if err != nil {
				b.Fatal(err)
			}
			objs = append(objs, o)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		inuse += float64(after.HeapInuse) - float64(before.HeapInuse)
		live += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(objs)
		runtime.KeepAlive(buf)
	}
	n := float64(rounds) * retainedObjects
	b.ReportMetric(inuse/n, "heap-inuse-B/obj")
	b.ReportMetric(live/n, "live-B/obj")
}
