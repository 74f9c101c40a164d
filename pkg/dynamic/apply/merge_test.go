package apply

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// decode parses a JSON object the way unstructured.Unstructured does
// (int64 for integers, float64 otherwise); "" gives nil.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

// encode renders v as JSON for failure messages.
func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name                           string
		observed, lastApplied, desired string
		want                           string
	}{
		{
			name:     "scalars set, others kept",
			observed: `{"spec":{"replicas":1,"clusterIP":"10.0.0.1"}}`,
			desired:  `{"spec":{"replicas":3}}`,
			want:     `{"spec":{"replicas":3,"clusterIP":"10.0.0.1"}}`,
		},
		{
			name:        "field in lastApplied and absent from desired is removed",
			observed:    `{"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"x":1,"y":2}}`,
			lastApplied: `{"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"x":1,"y":2}}`,
			desired:     `{"metadata":{"labels":{"a":"1"}},"spec":{"x":1}}`,
			want:        `{"metadata":{"labels":{"a":"1"}},"spec":{"x":1}}`,
		},
		{
			name:        "whole subtree in lastApplied and absent from desired is removed",
			observed:    `{"spec":{"x":1},"data":{"k":"v"}}`,
			lastApplied: `{"spec":{"x":1},"data":{"k":"v"}}`,
			desired:     `{"spec":{"x":1}}`,
			want:        `{"spec":{"x":1}}`,
		},
		{
			name: "fields set by others are kept",
			observed: `{"metadata":{"name":"s","labels":{"app":"web","injected-by":"someone"},"uid":"u1"},
				"spec":{"clusterIP":"10.0.0.7","type":"ClusterIP","selector":{"app":"web"}}}`,
			lastApplied: `{"metadata":{"name":"s","labels":{"app":"web"}},"spec":{"selector":{"app":"web"}}}`,
			desired:     `{"metadata":{"name":"s","labels":{"app":"web2"}},"spec":{"selector":{"app":"web2"}}}`,
			want: `{"metadata":{"name":"s","labels":{"app":"web2","injected-by":"someone"},"uid":"u1"},
				"spec":{"clusterIP":"10.0.0.7","type":"ClusterIP","selector":{"app":"web2"}}}`,
		},
		{
			name:        "nested maps merge at every level",
			observed:    `{"a":{"b":{"c":{"d":1,"e":2,"f":3},"g":4},"h":5}}`,
			lastApplied: `{"a":{"b":{"c":{"d":1,"e":2}}}}`,
			desired:     `{"a":{"b":{"c":{"d":10,"x":{"y":true}}}}}`,
			want:        `{"a":{"b":{"c":{"d":10,"f":3,"x":{"y":true}},"g":4},"h":5}}`,
		},
		{
			name:     "lastApplied nil: nothing is removed",
			observed: `{"spec":{"x":1,"y":2}}`,
			desired:  `{"spec":{"x":2}}`,
			want:     `{"spec":{"x":2,"y":2}}`,
		},
		{
			name:        "observed nil: desired without nulls",
			lastApplied: `{"spec":{"old":1}}`,
			desired:     `{"spec":{"x":[{"name":"a","v":null}],"y":null}}`,
			want:        `{"spec":{"x":[{"name":"a"}]}}`,
		},
		{
			name:     "null deletes a field even when lastApplied lacks it",
			observed: `{"spec":{"x":1,"y":2,"z":{"a":1}}}`,
			desired:  `{"spec":{"x":null,"z":null}}`,
			want:     `{"spec":{"y":2}}`,
		},
		{
			name:     "null kept where observed holds null",
			observed: `{"spec":{"x":null,"y":{"z":null,"w":1},"v":2}}`,
			desired:  `{"spec":{"x":null,"y":{"z":null},"v":null,"u":null}}`,
			want:     `{"spec":{"x":null,"y":{"z":null,"w":1}}}`,
		},
		{
			name:     "null inside a new object is not written",
			observed: `{}`,
			desired:  `{"spec":{"a":null,"b":{"c":null,"d":1}}}`,
			want:     `{"spec":{"b":{"d":1}}}`,
		},
		{
			name:        "null at the top level deletes",
			observed:    `{"spec":{"x":1},"data":{"a":"b"}}`,
			lastApplied: `{}`,
			desired:     `{"data":null}`,
			want:        `{"spec":{"x":1}}`,
		},
		{
			name:     "type mismatch: object replaces scalar",
			observed: `{"spec":{"x":"str","y":1}}`,
			desired:  `{"spec":{"x":{"a":1}}}`,
			want:     `{"spec":{"x":{"a":1},"y":1}}`,
		},
		{
			name:     "type mismatch: scalar replaces object",
			observed: `{"spec":{"x":{"a":1,"b":2}}}`,
			desired:  `{"spec":{"x":3}}`,
			want:     `{"spec":{"x":3}}`,
		},
		{
			name:     "type mismatch: object replaces list, list replaces object",
			observed: `{"a":[{"name":"x","keep":1}],"b":{"name":"x","keep":1}}`,
			desired:  `{"a":{"name":"x"},"b":[{"name":"x"}]}`,
			want:     `{"a":{"name":"x"},"b":[{"name":"x"}]}`,
		},
		{
			name:        "type mismatch in lastApplied is ignored",
			observed:    `{"spec":{"x":{"a":1,"b":2}}}`,
			lastApplied: `{"spec":{"x":"old"}}`,
			desired:     `{"spec":{"x":{"a":5}}}`,
			want:        `{"spec":{"x":{"a":5,"b":2}}}`,
		},
		{
			name:        "list of scalars is replaced",
			observed:    `{"args":["a","b","c"],"finalizers":["x"]}`,
			lastApplied: `{"args":["a","b"]}`,
			desired:     `{"args":["b","d"]}`,
			want:        `{"args":["b","d"],"finalizers":["x"]}`,
		},
		{
			name:     "list of objects without a common key is replaced",
			observed: `{"rules":[{"host":"a","extra":1},{"host":"b"}]}`,
			desired:  `{"rules":[{"host":"a"}]}`,
			want:     `{"rules":[{"host":"a"}]}`,
		},
		{
			name:     "key not shared by every element: list replaced",
			observed: `{"items":[{"name":"a","x":1},{"other":"b"}]}`,
			desired:  `{"items":[{"name":"a","y":2}]}`,
			want:     `{"items":[{"name":"a","y":2}]}`,
		},
		{
			name:     "mixed list is replaced",
			observed: `{"items":[{"name":"a","x":1}]}`,
			desired:  `{"items":[{"name":"a"},"b"]}`,
			want:     `{"items":[{"name":"a"},"b"]}`,
		},
		{
			name:     "null element: not a list map, replaced, null kept",
			observed: `{"items":[{"name":"a","x":1}]}`,
			desired:  `{"items":[{"name":"a"},null]}`,
			want:     `{"items":[{"name":"a"},null]}`,
		},
		{
			// As metacontroller's apply: the key comes from the observed
			// list too, and entries others added stay.
			name:     "empty desired list keeps others' entries",
			observed: `{"spec":{"volumes":[{"name":"kube-api-access-x","projected":{}}]}}`,
			desired:  `{"spec":{"volumes":[]}}`,
			want:     `{"spec":{"volumes":[{"name":"kube-api-access-x","projected":{}}]}}`,
		},
		{
			name:        "empty desired list removes what was applied",
			observed:    `{"spec":{"ports":[{"port":80,"nodePort":30080},{"port":81}]}}`,
			lastApplied: `{"spec":{"ports":[{"port":80}]}}`,
			desired:     `{"spec":{"ports":[]}}`,
			want:        `{"spec":{"ports":[{"port":81}]}}`,
		},
		{
			name:     "empty desired list replaces a list without a merge key",
			observed: `{"spec":{"args":["a","b"],"items":[{"x":1}]}}`,
			desired:  `{"spec":{"args":[],"items":[]}}`,
			want:     `{"spec":{"args":[],"items":[]}}`,
		},
		{
			name:        "port takes precedence over name",
			observed:    `{"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}]}`,
			lastApplied: `{"ports":[{"name":"http","port":80}]}`,
			desired:     `{"ports":[{"name":"web","port":80}]}`,
			// Merged by name, "http" would be removed (in lastApplied, not in
			// desired) and protocol/targetPort lost with it.
			want: `{"ports":[{"name":"web","port":80,"protocol":"TCP","targetPort":8080}]}`,
		},
		{
			name:        "containerPort takes precedence over name and port",
			observed:    `{"ports":[{"containerPort":8080,"name":"a","port":1,"protocol":"TCP"}]}`,
			lastApplied: `{"ports":[{"containerPort":8080,"name":"a","port":1}]}`,
			desired:     `{"ports":[{"containerPort":8080,"name":"b","port":2}]}`,
			want:        `{"ports":[{"containerPort":8080,"name":"b","port":2,"protocol":"TCP"}]}`,
		},
		{
			name:        "mountPath takes precedence over name",
			observed:    `{"volumeMounts":[{"name":"data","mountPath":"/a","readOnly":true}]}`,
			lastApplied: `{"volumeMounts":[{"name":"data","mountPath":"/a"}]}`,
			desired:     `{"volumeMounts":[{"name":"cache","mountPath":"/a"}]}`,
			want:        `{"volumeMounts":[{"name":"cache","mountPath":"/a","readOnly":true}]}`,
		},
		{
			name:        "key missing from one list falls back to the next key",
			observed:    `{"ports":[{"name":"http","port":80,"nodePort":30080},{"name":"admin","port":9000}]}`,
			lastApplied: `{"ports":[{"name":"http"}]}`,
			desired:     `{"ports":[{"name":"http","port":8080}]}`,
			// lastApplied's element has no port, so the list merges by name:
			// http is updated, admin (someone else's) kept.
			want: `{"ports":[{"name":"http","port":8080,"nodePort":30080},{"name":"admin","port":9000}]}`,
		},
		{
			name:     "duplicate key values fall back to the next unique key",
			observed: `{"mounts":[{"name":"a","path":"/x","extra":1},{"name":"b","path":"/x","extra":2}]}`,
			desired:  `{"mounts":[{"name":"b","path":"/x","new":true}]}`,
			want:     `{"mounts":[{"name":"a","path":"/x","extra":1},{"name":"b","path":"/x","new":true,"extra":2}]}`,
		},
		{
			name:        "key with duplicates in desired is skipped, so a second merge pairs elements the same way",
			observed:    `{"m":[{"port":1,"name":"p"},{"port":1,"name":"q"},{"name":"r","port":2}]}`,
			lastApplied: `{"m":[{"name":"p"}]}`,
			desired:     `{"m":[{"port":1,"name":"q","w":1},{"port":1,"name":"p"}]}`,
			// Merged by name (port is duplicated, and missing in lastApplied).
			// Were duplicated port values to mean "replace", the second merge
			// (which sees port in every list) would drop r.
			want: `{"m":[{"port":1,"name":"p"},{"port":1,"name":"q","w":1},{"name":"r","port":2}]}`,
		},
		{
			name:     "duplicate values of every key: replaced",
			observed: `{"mounts":[{"name":"a","extra":1},{"name":"a","extra":2}]}`,
			desired:  `{"mounts":[{"name":"a","new":true}]}`,
			want:     `{"mounts":[{"name":"a","new":true}]}`,
		},
		{
			name: "containers and their env merge by name",
			observed: `{"spec":{"containers":[{"name":"app","image":"app:1","imagePullPolicy":"IfNotPresent",
				"terminationMessagePath":"/dev/termination-log",
				"env":[{"name":"A","value":"1"},{"name":"B","value":"2"},{"name":"INJECTED","value":"x"}]},
				{"name":"sidecar","image":"proxy:1"}]}}`,
			lastApplied: `{"spec":{"containers":[{"name":"app","image":"app:1","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}]}}`,
			desired:     `{"spec":{"containers":[{"name":"app","image":"app:2","env":[{"name":"C","value":"3"},{"name":"A","value":"10"}]}]}}`,
			// B removed (ours before, not now), INJECTED and sidecar kept
			// (someone else's); observed's order, then the new C.
			want: `{"spec":{"containers":[{"name":"app","image":"app:2","imagePullPolicy":"IfNotPresent",
				"terminationMessagePath":"/dev/termination-log",
				"env":[{"name":"A","value":"10"},{"name":"INJECTED","value":"x"},{"name":"C","value":"3"}]},
				{"name":"sidecar","image":"proxy:1"}]}}`,
		},
		{
			name:        "list map element removed when in lastApplied only, kept when in observed only",
			observed:    `{"l":[{"name":"ours-old"},{"name":"theirs","x":1},{"name":"ours","y":1}]}`,
			lastApplied: `{"l":[{"name":"ours-old"},{"name":"ours"}]}`,
			desired:     `{"l":[{"name":"new"},{"name":"ours","z":2}]}`,
			want:        `{"l":[{"name":"theirs","x":1},{"name":"ours","y":1,"z":2},{"name":"new"}]}`,
		},
		{
			name:        "list map element merges with its lastApplied element",
			observed:    `{"l":[{"name":"a","x":1,"y":2,"z":3}]}`,
			lastApplied: `{"l":[{"name":"a","x":1,"y":2}]}`,
			desired:     `{"l":[{"name":"a","x":1}]}`,
			want:        `{"l":[{"name":"a","x":1,"z":3}]}`,
		},
		{
			name:     "null inside a list map element deletes",
			observed: `{"l":[{"name":"a","x":1,"y":2}]}`,
			desired:  `{"l":[{"name":"a","x":null}]}`,
			want:     `{"l":[{"name":"a","y":2}]}`,
		},
		{
			name:     "uid, ip and path keys",
			observed: `{"u":[{"uid":"1","a":1}],"i":[{"ip":"10.0.0.1","a":1}],"p":[{"path":"/","a":1}]}`,
			desired:  `{"u":[{"uid":"1","b":2}],"i":[{"ip":"10.0.0.1","b":2}],"p":[{"path":"/","b":2}]}`,
			want:     `{"u":[{"uid":"1","a":1,"b":2}],"i":[{"ip":"10.0.0.1","a":1,"b":2}],"p":[{"path":"/","a":1,"b":2}]}`,
		},
		{
			name:     "object-valued key is not a merge key",
			observed: `{"l":[{"name":{"a":1},"x":1}]}`,
			desired:  `{"l":[{"name":{"a":1},"y":1}]}`,
			want:     `{"l":[{"name":{"a":1},"y":1}]}`,
		},
		{
			name:     "keys of different JSON types differ",
			observed: `{"ports":[{"port":"80","x":1}]}`,
			desired:  `{"ports":[{"port":80}]}`,
			// Both lists merge by port, but "80" is not 80: the observed
			// element is someone else's and is kept.
			want: `{"ports":[{"port":"80","x":1},{"port":80}]}`,
		},
		{
			name:     "integer and float keys are the same number",
			observed: `{"ports":[{"port":80,"protocol":"TCP"}]}`,
			desired:  `{"ports":[{"port":80.0,"targetPort":8080}]}`,
			want:     `{"ports":[{"port":80,"protocol":"TCP","targetPort":8080}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, l, d := decode(t, tt.observed), decode(t, tt.lastApplied), decode(t, tt.desired)
			got, err := Merge(o, l, d)
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if want := decode(t, tt.want); !equal(got, want) {
				t.Errorf("Merge:\n got %s\nwant %s", encode(got), encode(want))
			}
			// Idempotence, as Apply relies on it.
			again, err := Merge(got, d, d)
			if err != nil {
				t.Fatalf("Merge again: %v", err)
			}
			if !equal(again, got) {
				t.Errorf("Merge(result, desired, desired) changed the result:\n got %s\nwant %s", encode(again), encode(got))
			}
		})
	}
}

// TestMergeListKeepsObservedOrder checks the order of a merged list map.
// The expected lists follow metacontroller's merge: the observed elements
// still there, in observed's order, then the new desired ones in desired's
// order.
func TestMergeListKeepsObservedOrder(t *testing.T) {
	tests := []struct {
		name                           string
		observed, lastApplied, desired string
		want                           string
	}{
		{
			name: "adopted child: owner references written as metacontroller appends its controller reference",
			// metacontroller created the child with the hook's reference
			// first and its controller reference appended; metactl's desired
			// state puts the controller reference first.
			observed: `{"ownerReferences":[
				{"apiVersion":"v1","kind":"ConfigMap","name":"anchor","uid":"u-anchor"},
				{"apiVersion":"t/v1","kind":"Thing","name":"p","uid":"u-p","controller":true,"blockOwnerDeletion":true}]}`,
			lastApplied: `{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"anchor","uid":"u-anchor"}]}`,
			desired: `{"ownerReferences":[
				{"apiVersion":"t/v1","kind":"Thing","name":"p","uid":"u-p","controller":true,"blockOwnerDeletion":true},
				{"apiVersion":"v1","kind":"ConfigMap","name":"anchor","uid":"u-anchor"}]}`,
			want: `{"ownerReferences":[
				{"apiVersion":"v1","kind":"ConfigMap","name":"anchor","uid":"u-anchor"},
				{"apiVersion":"t/v1","kind":"Thing","name":"p","uid":"u-p","controller":true,"blockOwnerDeletion":true}]}`,
		},
		{
			name:     "same elements in another order: observed's order",
			observed: `{"ports":[{"port":3,"x":1},{"port":1},{"port":2}]}`,
			desired:  `{"ports":[{"port":1},{"port":2},{"port":3}]}`,
			want:     `{"ports":[{"port":3,"x":1},{"port":1},{"port":2}]}`,
		},
		{
			name:        "removed, kept, merged and new elements",
			observed:    `{"env":[{"name":"D","value":"theirs"},{"name":"B","value":"1"},{"name":"A","value":"old"},{"name":"Z","value":"gone"}]}`,
			lastApplied: `{"env":[{"name":"A"},{"name":"B"},{"name":"Z"}]}`,
			desired:     `{"env":[{"name":"N2","value":"n2"},{"name":"A","value":"new"},{"name":"N1","value":"n1"},{"name":"B","value":"1"}]}`,
			// D is someone else's (kept in place), Z was ours (removed), A and
			// B stay where they were, N2 and N1 follow in desired's order.
			want: `{"env":[{"name":"D","value":"theirs"},{"name":"B","value":"1"},{"name":"A","value":"new"},{"name":"N2","value":"n2"},{"name":"N1","value":"n1"}]}`,
		},
		{
			name:     "more elements than the linear search handles: same order rule",
			observed: `{"l":[{"name":"j"},{"name":"i"},{"name":"h"},{"name":"g"},{"name":"f"},{"name":"e"},{"name":"d"},{"name":"c"},{"name":"b"}]}`,
			desired:  `{"l":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d"},{"name":"e"},{"name":"f"},{"name":"g"},{"name":"h"},{"name":"i"},{"name":"j"}]}`,
			want:     `{"l":[{"name":"j"},{"name":"i"},{"name":"h"},{"name":"g"},{"name":"f"},{"name":"e"},{"name":"d"},{"name":"c"},{"name":"b"},{"name":"a"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, l, d := decode(t, tt.observed), decode(t, tt.lastApplied), decode(t, tt.desired)
			got, err := Merge(o, l, d)
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			// equal compares lists element by element: order counts.
			if want := decode(t, tt.want); !equal(got, want) {
				t.Errorf("Merge:\n got %s\nwant %s", encode(got), encode(want))
			}
			if again, _ := Merge(got, d, d); !equal(again, got) {
				t.Errorf("Merge(result, desired, desired) changed the order:\n got %s\nwant %s", encode(again), encode(got))
			}
		})
	}
}

func TestMergeNumbersCompareByValue(t *testing.T) {
	observed := map[string]any{"spec": map[string]any{
		"replicas": int64(3),
		"ports":    []any{map[string]any{"port": int64(80), "nodePort": int64(30080)}},
	}}
	desired := map[string]any{"spec": map[string]any{
		"replicas": float64(3),
		"ports":    []any{map[string]any{"port": float64(80)}},
	}}
	got, err := Merge(observed, desired, desired)
	if err != nil {
		t.Fatal(err)
	}
	// The list merged by port although one side holds int64 and the other
	// float64: nodePort (someone else's) is kept.
	if !equal(got, observed) {
		t.Errorf("got %s, want %s", encode(got), encode(observed))
	}
	ports := got["spec"].(map[string]any)["ports"].([]any)
	if len(ports) != 1 {
		t.Fatalf("ports = %s, want one element", encode(ports))
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{int64(3), float64(3), true},
		{float64(3), int64(3), true},
		{int64(3), float64(3.5), false},
		{int(3), uint8(3), true},
		{json.Number("3"), int64(3), true},
		{json.Number("3.0"), int64(3), true},
		{json.Number("1e2"), float64(100), true},
		{json.Number("1.5"), float64(1.5), true},
		{int64(1<<53 + 1), float64(1 << 53), false},
		{uint64(math.MaxUint64), float64(math.MaxUint64), false}, // float64 rounds up to 2^64
		{uint64(1 << 63), float64(1 << 63), true},
		{float64(0), math.Copysign(0, -1), true},
		{"3", int64(3), false},
		{nil, map[string]any(nil), true},
		{[]any(nil), nil, true},
		{map[string]any{}, nil, false},
		{[]any{}, nil, false},
		{map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)}, true},
		{map[string]any{"a": int64(1)}, map[string]any{"b": int64(1)}, false},
		{map[string]any{"a": nil}, map[string]any{}, false},
		{[]any{int64(1), "a"}, []any{float64(1), "a"}, true},
		{[]any{"a", "b"}, []any{"b", "a"}, false},
		{true, true, true},
		{true, "true", false},
	}
	for _, tt := range tests {
		if got := equal(tt.a, tt.b); got != tt.want {
			t.Errorf("equal(%#v, %#v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestMergeDoesNotModifyArguments(t *testing.T) {
	o := decode(t, `{"metadata":{"labels":{"a":"1","x":"y"}},"spec":{"l":[{"name":"a","v":1},{"name":"o"}],"s":["a"],"m":{"k":1}}}`)
	l := decode(t, `{"metadata":{"labels":{"a":"1"}},"spec":{"l":[{"name":"a","v":1}],"s":["a"]}}`)
	d := decode(t, `{"metadata":{"labels":{"b":"2"}},"spec":{"l":[{"name":"a","v":2,"n":null}],"s":["b"],"m":{"k":2},"new":{"deep":[{"name":"z"}]}}}`)
	oc, lc, dc := deepCopy(o), deepCopy(l), deepCopy(d)
	got, err := Merge(o, l, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name      string
		now, orig any
	}{{"observed", o, oc}, {"lastApplied", l, lc}, {"desired", d, dc}} {
		if !equal(a.now, a.orig) {
			t.Errorf("Merge modified %s: %s, was %s", a.name, encode(a.now), encode(a.orig))
		}
	}
	// The result shares nothing with the arguments: scribble over all of it.
	scribble(got)
	for _, a := range []struct {
		name      string
		now, orig any
	}{{"observed", o, oc}, {"lastApplied", l, lc}, {"desired", d, dc}} {
		if !equal(a.now, a.orig) {
			t.Errorf("modifying the result modified %s: %s, was %s", a.name, encode(a.now), encode(a.orig))
		}
	}
}

// scribble overwrites every map entry and slice element of v, depth first.
func scribble(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			scribble(e)
			t[k] = "scribbled"
		}
		t["scribbled"] = true
	case []any:
		for i, e := range t {
			scribble(e)
			t[i] = "scribbled"
		}
	}
}

func TestMergeRejectsNonJSONValues(t *testing.T) {
	tests := []struct {
		name     string
		o, l, d  map[string]any
		wantErrs []string
	}{
		{
			name:     "channel in desired",
			d:        map[string]any{"spec": map[string]any{"l": []any{map[string]any{"c": make(chan int)}}}},
			wantErrs: []string{"desired", "spec.l[0].c", "chan int"},
		},
		{
			name:     "NaN in observed",
			o:        map[string]any{"x": math.NaN()},
			wantErrs: []string{"observed", "x", "NaN"},
		},
		{
			name:     "bad json.Number in lastApplied",
			l:        map[string]any{"n": json.Number("0x10")},
			wantErrs: []string{"lastApplied", "n", `"0x10"`},
		},
		{
			name:     "typed string map",
			d:        map[string]any{"labels": map[string]string{"a": "b"}},
			wantErrs: []string{"desired", "labels", "map[string]string"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Merge(tt.o, tt.l, tt.d)
			if err == nil {
				t.Fatalf("Merge = %v, want an error", got)
			}
			for _, s := range tt.wantErrs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestMergeAcceptsGoNumberTypes(t *testing.T) {
	o := map[string]any{"a": int(1), "b": uint16(2), "c": float32(1.5), "d": json.Number("4")}
	d := map[string]any{"a": int32(1), "e": json.Number("5")}
	got, err := Merge(o, nil, d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": int64(1), "b": int64(2), "c": 1.5, "d": int64(4), "e": int64(5)}
	if !equal(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}
