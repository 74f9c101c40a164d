package informer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unique"
	"unsafe"

	"k8s.io/apimachinery/pkg/labels"
)

// TestPairsDecodeAsAMap: Pairs decode every JSON object of strings to what
// a map decodes it to.
func TestPairsDecodeAsAMap(t *testing.T) {
	for _, data := range []string{
		`{}`,
		` { } `,
		`null`,
		`{"app":"web"}`,
		`{ "a" : "1" , "b":"" ,"":"empty key"}`,
		`{"k":"say \"hi\"\n","\u00e9t\u00e9":"\ud83d\ude00 \/ \\"}`,
		"{\"bad\":\"\xff\xfe utf-8\"}",
		`{"dup":"first","other":"x","dup":"last"}`,
		`{"z":"1","a":"2","m":"3","a":"4"}`,
		`{"a":null,"b":"x"}`,
		`{"last-applied":"{\"apiVersion\":\"v1\",\"data\":{\"value\":\"v1\"}}"}`,
	} {
		var want map[string]string
		if err := json.Unmarshal([]byte(data), &want); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		var p Pairs
		if err := json.Unmarshal([]byte(data), &p); err != nil {
			t.Errorf("%s: %v", data, err)
			continue
		}
		if got := p.Map(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: decoded %v, want %v", data, got, want)
		}
		if p.Len() != len(want) {
			t.Errorf("%s: %d pairs, want %d (a key given twice is kept once)", data, p.Len(), len(want))
		}
		for k, v := range want {
			if got, ok := p.Lookup(k); !ok || got != v {
				t.Errorf("%s: Lookup(%q) = %q, %v; want %q", data, k, got, ok, v)
			}
		}
	}
}

func TestPairsRefuseWhatIsNotAnObjectOfStrings(t *testing.T) {
	for _, data := range []string{`[]`, `{"a":1}`, `{"a":"b"`, `{"a" "b"}`, `"a"`, `{"a":{"b":"c"}}`} {
		var p Pairs
		if err := json.Unmarshal([]byte(data), &p); err == nil {
			t.Errorf("%s: decoded to %v, want an error", data, p)
		}
	}
}

// TestLabelsOfMatchesAsTheMap: a selector matches an Object's Pairs as it
// matches its labels as a map, and a key and a namespace that two objects
// repeat are stored once.
func TestLabelsOfMatchesAsTheMap(t *testing.T) {
	a, err := NewObject([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","labels":{"app":"web","tier":"front"},"annotations":{"note":"x"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewObject([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"ns","labels":{"app":"db"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"app=web", "app!=web", "tier", "!tier", "app in (web,db),tier", "app notin (db)", ""} {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []*Object{a, b} {
			if got, want := sel.Matches(LabelsOf(o)), sel.Matches(labels.Set(o.GetLabels())); got != want {
				t.Errorf("%q on %s: %v with LabelsOf, %v with the map", s, o.Name, got, want)
			}
		}
	}
	if v, ok := AnnotationsOf(a).Lookup("note"); !ok || v != "x" {
		t.Errorf("AnnotationsOf(a) note = %q, %v", v, ok)
	}
	if AnnotationsOf(b).Has("note") || b.GetAnnotations() != nil {
		t.Errorf("b has annotations %v", b.GetAnnotations())
	}
	if unsafe.StringData(a.Labels[0]) != unsafe.StringData(b.Labels[0]) || unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("the label key app or the namespace is stored twice")
	}
}

// TestInternerStaysBounded: past its bound the interner starts over; what
// it returns is still the string asked for.
func TestInternerStaysBounded(t *testing.T) {
	in := &interner{max: 4}
	in.intern("key-0")
	for i := range 10 {
		s := in.intern(string(rune('a'+i)) + "-key")
		if s != string(rune('a'+i))+"-key" {
			t.Fatalf("intern returned %q", s)
		}
		if len(in.m) > 4 {
			t.Fatalf("%d strings kept, more than the bound 4", len(in.m))
		}
	}
	// After a start-over, a string is shared again from its next intern.
	after := in.internBytes([]byte("key-0"))
	if again := in.internBytes([]byte("key-0")); again != "key-0" || unsafe.StringData(again) != unsafe.StringData(after) {
		t.Errorf("internBytes after the start-over = %q, not shared with the intern before it", again)
	}
	in = &interner{max: 4}
	first := in.intern("key-0")
	if again := in.internBytes([]byte("key-0")); unsafe.StringData(again) != unsafe.StringData(first) {
		t.Error("internBytes returned a new copy of an interned string")
	}
	long := strings.Repeat("x", internMax+1)
	if in.intern(long); len(in.m) > 4 || in.m[long] != "" {
		t.Error("a string longer than internMax was kept")
	}
}

// TestDeepCopyOwnsItsPairs: writing the copy's Pairs leaves the cached
// object as it was, and GetObjectMeta sees the labels.
func TestDeepCopyOwnsItsPairs(t *testing.T) {
	o, err := NewObject([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"web"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := o.DeepCopyObject().(*Object)
	c.Labels[1] = "changed"
	if o.Labels.Get("app") != "web" {
		t.Error("DeepCopyObject shares the labels' Pairs")
	}
	if got := o.GetObjectMeta().GetLabels()["app"]; got != "web" {
		t.Errorf("GetObjectMeta().GetLabels()[app] = %q, want web", got)
	}
}

// internKeys are strings the interner sees: label and annotation keys,
// namespaces, kinds, an owner's UID.
var internKeys = [][]byte{
	[]byte("app.kubernetes.io/name"), []byte("controller-uid"), []byte("default"),
	[]byte("ConfigMap"), []byte("7d1b0f9e-2c8a-4f6e-8a51-3b9c3a1d2e4f"), []byte("v1"),
}

// BenchmarkInternBytes is the interner's lookup of a key scanned from the
// API server's JSON, as the cache decodes an object, beside
// BenchmarkUniqueMake, the standard library's unique.Make for the same
// keys: the question of issue 30 whether the hand-rolled interner still
// earns its place (go test -run XXX -bench 'InternBytes|UniqueMake'
// -benchmem ./pkg/dynamic/informer/).
func BenchmarkInternBytes(b *testing.B) {
	for _, k := range internKeys {
		interned.internBytes(k)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = interned.internBytes(internKeys[i%len(internKeys)])
	}
}

// BenchmarkUniqueMake: see BenchmarkInternBytes.
func BenchmarkUniqueMake(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = unique.Make(string(internKeys[i%len(internKeys)])).Value()
	}
}
