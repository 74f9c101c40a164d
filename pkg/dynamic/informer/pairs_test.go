package informer

import (
	"encoding/json"
	"reflect"
	"testing"
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
// matches its labels as a map, and keys repeated over objects are stored
// once.
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
