/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"testing"

	kjson "sigs.k8s.io/json"

	"github.com/metactl/metactl/internal/hookfixture"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

func encodeForTest(t testing.TB, request any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := newEncoder(&buf).request(request); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var sampleController = hookfixture.Controller

// The hand-written encoding of the request types must be exactly what
// encoding/json makes of them, HTML escaping and all.
func TestRequestEncodingMatchesEncodingJSON(t *testing.T) {
	parent := newObject("ctl.example.com/v1", "Thing", "ns", "p")
	parent.Object["spec"] = map[string]any{"n": int64(3), "f": 1.5, "html": "<a&b>", "u": "\u2028é", "list": []any{true, nil}}
	children := NewObjectMap()
	children.EnsureKey("v1", "Pod")
	children.Insert(v1alpha1.HookVersionV1, true, newObject("v1", "ConfigMap", "ns", "c"))
	related := NewObjectMap()
	related.Insert(v1alpha1.HookVersionV1, true, newObject("v1", "Secret", "ns", "s"))

	for name, req := range map[string]any{
		"composite":       &CompositeSyncRequest{Controller: sampleController(), Parent: parent, Children: children, Related: related, Finalizing: true},
		"composite empty": &CompositeSyncRequest{},
		"decorator":       &DecoratorSyncRequest{Controller: sampleController(), Object: parent, Attachments: children, Related: related},
		"customize":       &CustomizeRequest{Controller: sampleController(), Parent: parent},
		"other value":     map[string]any{"x": []int{1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			got := encodeForTest(t, req)
			want, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func TestRequestBodyReturnsBufferOnlyWhenAllReadersClosed(t *testing.T) {
	rb, err := EncodeRequest(map[string]any{"a": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	r1 := rb.NewReader()
	r2 := rb.NewReader()
	rb.Release() // the caller is done first, as when Do returns early
	r1.Close()
	r1.Close() // a second Close must not release twice
	if got := rb.refs.Load(); got != 1 {
		t.Fatalf("refs = %d after caller and r1 released, want 1", got)
	}
	b, err := io.ReadAll(r2)
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("r2 read %q, %v", b, err)
	}
	r2.Close()
	if got := rb.refs.Load(); got != 0 {
		t.Fatalf("refs = %d, want 0", got)
	}
}

func TestValueEncodingMatchesEncodingJSON(t *testing.T) {
	var nilMap map[string]any
	var nilSlice []any
	for name, v := range map[string]any{
		"escapes":      "q\"b\\s/\b\f\n\r\t\x00\x1f\x7f<>&\u2028\u2029é\xff\xfe日本",
		"floats":       []any{0.0, math.Copysign(0, -1), 1.0, 1.5, 1e-6, 1e-7, 123456789e-15, 1e20, 1e21, 1.7976931348623157e308, 5e-324, -2.5e-10},
		"ints":         []any{int64(0), int64(-1), int64(9223372036854775807), int64(-9223372036854775808), 7, int32(-3)},
		"other types":  map[string]any{"f32": float32(1.1), "u": uint8(3), "ss": []string{"a", "<"}, "ms": map[string]string{"b": "&"}, "num": json.Number("12.50"), "raw": json.RawMessage(`{"z": 1}`)},
		"nil values":   map[string]any{"m": nilMap, "s": nilSlice, "n": nil, "b": false, "t": true},
		"empty":        map[string]any{"m": map[string]any{}, "s": []any{}, "e": ""},
		"key ordering": map[string]any{"b": 1, "a": 2, "B": 3, "aa": 4, "é": 5, "": 6, "a<": 7},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := newEncoder(&buf).value(v); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("got  %s\nwant %s", buf.Bytes(), want)
			}
		})
	}
}

func TestValueEncodingErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := map[string]any{}
	for range 2 * maxDirectDepth {
		deep = map[string]any{"d": []any{deep}}
	}
	for name, v := range map[string]any{
		"NaN":    math.NaN(),
		"Inf":    map[string]any{"x": []any{math.Inf(1)}},
		"func":   map[string]any{"f": func() {}},
		"cyclic": cyclic,
	} {
		var buf bytes.Buffer
		if err := newEncoder(&buf).value(v); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Deep but acyclic values are fine, and identical to encoding/json.
	var buf bytes.Buffer
	if err := newEncoder(&buf).value(deep); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(deep)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Error("deep value differs from encoding/json")
	}
}

// An encoder that failed half-way is reusable from the pool.
func TestPooledEncoderAfterError(t *testing.T) {
	p := getEncoder()
	if err := p.value(map[string]any{"a": map[string]any{"b": func() {}, "c": 1}}); err == nil {
		t.Fatal("no error")
	}
	putEncoder(p)
	for range 3 { // the pool may hand back the same encoder or a new one
		p = getEncoder()
		if err := p.value(map[string]any{"x": map[string]any{"y": 1}}); err != nil {
			t.Fatal(err)
		}
		if got := p.b.String(); got != `{"x":{"y":1}}` {
			t.Fatalf("got %s", got)
		}
		putEncoder(p)
	}
}

// FuzzEncodeValue checks the direct encoding against encoding/json on
// whatever JSON decodes to.
func FuzzEncodeValue(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5,-0,1e-7,1e21,"x\u2028<>&\"\\\n",null,true,{"":{}}],"b":9223372036854775807,"c":9223372036854775808}`))
	f.Add([]byte("\"\xff\xfe\x00\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &v); err != nil {
			return
		}
		var buf bytes.Buffer
		if err := newEncoder(&buf).value(v); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("got  %s\nwant %s", buf.Bytes(), want)
		}
	})
}

// FuzzEncodeString checks string escaping, invalid UTF-8 included, against
// encoding/json.
func FuzzEncodeString(f *testing.F) {
	f.Add("plain")
	f.Add("q\"b\\\b\f\n\r\t\x00\x1f<>&\u2028\u2029é\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	})
}
