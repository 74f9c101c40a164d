package jsondiff

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"equal", `{"a":1,"b":[1,2],"c":{"d":null}}`, `{"c":{"d":null},"b":[1,2],"a":1}`, nil},
		{"replace", `{"spec":{"replicas":1}}`, `{"spec":{"replicas":3}}`, []string{"~ .spec.replicas: 1 -> 3"}},
		{"add and remove", `{"data":{"a":"x"}}`, `{"data":{"b":"y"}}`, []string{`- .data.a: "x"`, `+ .data.b: "y"`}},
		{"quoted key", `{"labels":{}}`, `{"labels":{"app.kubernetes.io/name":"x"}}`, []string{`+ .labels["app.kubernetes.io/name"]: "x"`}},
		{"list by index", `{"l":[1,2,3]}`, `{"l":[1,5]}`, []string{"~ .l[1]: 2 -> 5", "- .l[2]: 3"}},
		{"kind change", `{"s":{"a":1}}`, `{"s":"text"}`, []string{`~ .s: {"a":1} -> "text"`}},
		{"root", `1`, `2`, []string{"~ .: 1 -> 2"}},
		{"null and absent differ", `{"a":null}`, `{}`, []string{"- .a: null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range Diff(decode(t, tc.old), decode(t, tc.new)) {
				got = append(got, c.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestNumbersCompareByValue(t *testing.T) {
	if !Equal(map[string]any{"n": int64(3)}, map[string]any{"n": 3.0}) {
		t.Error("int64(3) and 3.0 differ")
	}
	if !Equal(json.Number("3"), 3) {
		t.Error(`json.Number("3") and 3 differ`)
	}
	if Equal(int64(3), "3") {
		t.Error(`3 and "3" are equal`)
	}
	// Numbers as written (json.Number, from a decoder with UseNumber) or
	// integers compare exactly: no digit lost to a float64.
	for _, tc := range []struct {
		a, b  any
		equal bool
	}{
		{json.Number("9007199254740993"), json.Number("9007199254740992"), false},
		{json.Number("9007199254740993"), int64(9007199254740992), false},
		{uint64(18446744073709551615), json.Number("18446744073709551614"), false},
		{json.Number("0.30000000000000000001"), json.Number("0.3"), false},
		{json.Number("2"), json.Number("2.0"), true},
		{json.Number("2e3"), json.Number("2000"), true},
		{json.Number("9007199254740993"), json.Number("9007199254740993"), true},
		{json.Number("1e99999999"), json.Number("1e99999999"), true},
	} {
		if got := Equal(tc.a, tc.b); got != tc.equal {
			t.Errorf("Equal(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.equal)
		}
	}
	var a, b any
	for s, v := range map[string]*any{`{"n":9007199254740993}`: &a, `{"n":9007199254740992}`: &b} {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := Diff(a, b); len(got) != 1 || got[0].String() != "~ .n: 9007199254740993 -> 9007199254740992" {
		t.Errorf("Diff = %v", got)
	}
}

func TestByObjectKey(t *testing.T) {
	a := decode(t, `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","namespace":"ns"},"spec":{"x":1}}]`).([]any)
	b := decode(t, `[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","namespace":"ns"},"spec":{"x":2}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]`).([]any)
	ka, ok := ByObjectKey(a)
	if !ok {
		t.Fatal("not keyed")
	}
	kb, _ := ByObjectKey(b)
	got := Diff(ka, kb)
	if len(got) != 1 || got[0].String() != `~ ["v1/Pod/ns/b"].spec.x: 1 -> 2` {
		t.Errorf("Diff = %v", got)
	}
	if _, ok := ByObjectKey([]any{"x"}); ok {
		t.Error("a list of strings was keyed")
	}
	if _, ok := ByObjectKey(append(a, a[0])); ok {
		t.Error("a list with a duplicate was keyed")
	}
}
