package jsonscan

import (
	"encoding/json"
	"testing"
)

// TestAppendWithoutLeavesValidJSON cuts metadata and managedFields wherever
// they stand in their object: what is left is the same object without them.
func TestAppendWithoutLeavesValidJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"metadata":{"name":"a"}}`, `{}`},
		{`{"metadata":{"name":"a"},"spec":{}}`, `{"spec":{}}`},
		{`{"spec":{},"metadata":{"name":"a"}}`, `{"spec":{}}`},
		{`{"a":1, "metadata" : {"name":"a"} ,"b":[2]}`, `{"a":1,"b":[2]}`},
	} {
		f, err := TopLevel([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got := AppendWithout(nil, []byte(tc.in), f.Metadata)
		if !sameJSON(t, got, []byte(tc.want)) {
			t.Errorf("%s without metadata: %s, want %s", tc.in, got, tc.want)
		}
	}
	metadata := []byte(`{"name":"a","managedFields":[{"manager":"m"}],"uid":"u"}`)
	f, err := TopLevel(metadata)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendWithout(nil, metadata, f.ManagedFields); !sameJSON(t, got, []byte(`{"name":"a","uid":"u"}`)) {
		t.Errorf("without managedFields: %s", got)
	}
}

// TestTopLevelOfAWatchEvent finds a watch event's type and object, and
// ignores fields of the same names deeper down.
func TestTopLevelOfAWatchEvent(t *testing.T) {
	data := []byte(`{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"type":"x","object":"y"}}}`)
	f, err := TopLevel(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.EventType != "ADDED" {
		t.Errorf("type %q", f.EventType)
	}
	if got := string(data[f.Object.Start:f.Object.End]); got != `{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"type":"x","object":"y"}}` {
		t.Errorf("object %s", got)
	}
	if f.Metadata.Start != 0 || f.Kind != "" {
		t.Errorf("found the object's fields at the top level: %+v", f)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("%s: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// TestSkipValueOfStrings ends each string at its first quote not escaped:
// one preceded by an even number of backslashes (none included).
func TestSkipValueOfStrings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // -1: an error
	}{
		{`"abc",`, 5},
		{`"a\"b"`, 6},
		{`"a\\"b"`, 5},
		{`"a\\\"b",`, 8},
		{`"\"\\"`, 6},
		{`""`, 2},
		{`"abc`, -1},
		{`"abc\"`, -1},
	} {
		got, err := SkipValue([]byte(tc.in), 0)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%s: got %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// TestNamespaceOfMetadata finds a metadata object's namespace, not one
// deeper down, and PlainString reads only what needs no decoder.
func TestNamespaceOfMetadata(t *testing.T) {
	metadata := []byte(`{"name":"a","labels":{"namespace":"no"},"namespace" : "team-a","uid":"u"}`)
	f, err := TopLevel(metadata)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := PlainString(metadata[f.Namespace.Start:f.Namespace.End]); !ok || got != "team-a" {
		t.Errorf("namespace %q, %v; want team-a", got, ok)
	}
	if f, _ := TopLevel([]byte(`{"name":"a"}`)); f.Namespace.Start != 0 {
		t.Errorf("a namespace found where there is none: %+v", f.Namespace)
	}
	for in, want := range map[string]struct {
		s  string
		ok bool
	}{`""`: {"", true}, `"x"`: {"x", true}, `"\u0061"`: {"", false}, `null`: {"", false}, `5`: {"", false}, `"a\"b"`: {"", false}} {
		if s, ok := PlainString([]byte(in)); s != want.s || ok != want.ok {
			t.Errorf("PlainString(%s) = %q, %v; want %q, %v", in, s, ok, want.s, want.ok)
		}
	}
}
