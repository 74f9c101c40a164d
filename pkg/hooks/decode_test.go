/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

const (
	loose  = v1alpha1.ResponseUnMarshallModeLoose
	strict = v1alpha1.ResponseUnMarshallModeStrict
)

var bothModes = []v1alpha1.ResponseUnMarshallMode{loose, strict}

const childCM = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`

func TestCompositeDecode(t *testing.T) {
	body := `{"status":{"replicas":3,"ratio":0.5,"nested":{"n":9007199254740993}},` +
		`"children":[` + childCM + `,{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"},"spec":{"replicas":2}}],` +
		`"resyncAfterSeconds":1.5,"finalized":true}`
	for _, mode := range bothModes {
		t.Run(string(mode), func(t *testing.T) {
			var r CompositeSyncResponse
			if err := r.DecodeHookResponse([]byte(body), mode); err != nil {
				t.Fatal(err)
			}
			want := CompositeSyncResponse{
				Status: map[string]any{"replicas": int64(3), "ratio": 0.5, "nested": map[string]any{"n": int64(9007199254740993)}},
				Children: []*unstructured.Unstructured{
					{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}, "data": map[string]any{"k": "v"}}},
					{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "ns"}, "spec": map[string]any{"replicas": int64(2)}}},
				},
				ResyncAfterSeconds: 1.5,
				Finalized:          true,
			}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Error(diff)
			}
			// Integers are int64, as unstructured helpers expect.
			replicas, found, err := unstructured.NestedInt64(r.Children[1].Object, "spec", "replicas")
			if err != nil || !found || replicas != 2 {
				t.Errorf("NestedInt64(spec.replicas) = %d, %v, %v", replicas, found, err)
			}
		})
	}
}

func TestCompositeDecodeUnknownFields(t *testing.T) {
	body := []byte(`{"status":{},"childrens":[` + childCM + `],"children":[` + childCM + `]}`)

	var r CompositeSyncResponse
	if err := r.DecodeHookResponse(body, loose); err != nil {
		t.Fatalf("loose: %v", err)
	}
	if len(r.Children) != 1 {
		t.Errorf("loose: %d children, want 1", len(r.Children))
	}

	err := r.DecodeHookResponse(body, strict)
	if err == nil || !strings.Contains(err.Error(), `"childrens"`) {
		t.Fatalf("strict: err = %v, want an error naming childrens", err)
	}
	if r.Children != nil || r.Status != nil {
		t.Errorf("strict: response not reset on error: %+v", r)
	}

	// Keys are case-sensitive: "Children" is unknown, not children.
	if err := r.DecodeHookResponse([]byte(`{"Children":[`+childCM+`]}`), strict); err == nil {
		t.Error("strict: Children accepted")
	}
	if err := r.DecodeHookResponse([]byte(`{"Children":[`+childCM+`]}`), loose); err != nil || len(r.Children) != 0 {
		t.Errorf("loose: Children read as children: %v, %v", r.Children, err)
	}
}

func TestStrictAllowsUnknownFieldsInsideChildren(t *testing.T) {
	body := `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","madeUp":1},"whatever":{"x":[1]}}],` +
		`"status":{"anything":true}}`
	var r CompositeSyncResponse
	if err := r.DecodeHookResponse([]byte(body), strict); err != nil {
		t.Fatal(err)
	}
	if r.Children[0].Object["whatever"] == nil {
		t.Error("unknown child field dropped")
	}
}

func TestStrictRejectsDuplicateFields(t *testing.T) {
	body := []byte(`{"children":[],"children":[` + childCM + `]}`)
	var r CompositeSyncResponse
	if err := r.DecodeHookResponse(body, strict); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("strict: err = %v, want a duplicate field error", err)
	}
	if err := r.DecodeHookResponse(body, loose); err != nil {
		t.Errorf("loose: %v", err)
	}
}

func TestCompositeDecodeNulls(t *testing.T) {
	for _, body := range []string{`{}`, `{"status":null,"children":null}`, ` {"status":null} `} {
		for _, mode := range bothModes {
			var r CompositeSyncResponse
			if err := r.DecodeHookResponse([]byte(body), mode); err != nil {
				t.Fatalf("%s %s: %v", mode, body, err)
			}
			if r.Status == nil || len(r.Status) != 0 {
				t.Errorf("%s %s: status = %#v, want empty non-nil", mode, body, r.Status)
			}
			if len(r.Children) != 0 {
				t.Errorf("%s %s: children = %v, want none", mode, body, r.Children)
			}
		}
	}
}

func TestCompositeDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty", ``, "empty body"},
		{"null body", `null`, "null"},
		{"array body", `[]`, "array"},
		{"not JSON", `{"status":`, "JSON"},
		{"JavaScript literal", `{children: [], status: {}}`, `invalid JSON at offset 2 (the body starts "{children: [], status: {}}")`},
		{"HTML page", "<html>\n<title>502 Bad Gateway</title>", `body is not JSON (it starts "<html>\n<title>502 Bad Gateway</title>"), want a JSON object`},
		{"long text", "Traceback (most recent call last): File hook.py, line 3, in sync", `(it starts "Traceback (most recent call last): File hook.py,"...)`},
		{"scrubbed", `{"children":[{"kind":"Secret","data":{"x":"aHVudGVy"}}] x`, `(the body starts "{\"children\":[{\"kind\":\""...)`},
		{"trailing garbage", `{} x`, "invalid character"},
		{"status string", `{"status":"ok"}`, "status is a string"},
		{"status number", `{"status":3}`, "status is a number"},
		{"status array", `{"status":[]}`, "status is an array"},
		{"children object", `{"children":{}}`, "children"},
		{"child not object", `{"children":[` + childCM + `,"x"]}`, "children[1] is a string"},
		{"child null", `{"children":[null]}`, "children[0] is null"},
		{"child missing name", `{"children":[` + childCM + `,{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}]}`, "children[1]: metadata.name is required"},
		{"child empty name", `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":""}}]}`, "children[0]: metadata.name is required"},
		{"child no metadata", `{"children":[{"apiVersion":"v1","kind":"ConfigMap"}]}`, "children[0]: metadata.name is required"},
		{"child metadata string", `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":"m"}]}`, "children[0]: metadata is a string"},
		{"child name number", `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":1}}]}`, "children[0]: metadata.name is a number"},
		{"child namespace number", `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":1}}]}`, "metadata.namespace is a number"},
		{"child missing kind", `{"children":[{"apiVersion":"v1","metadata":{"name":"a"}}]}`, "children[0]: kind is required"},
		{"child missing apiVersion", `{"children":[{"kind":"ConfigMap","metadata":{"name":"a"}}]}`, "children[0]: apiVersion is required"},
		{"child bad apiVersion", `{"children":[{"apiVersion":"a/b/c","kind":"X","metadata":{"name":"a"}}]}`, `children[0]: apiVersion "a/b/c"`},
		{"resync string", `{"resyncAfterSeconds":"5"}`, "resyncAfterSeconds"},
		{"number out of range", `{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"x":1e999}]}`, "1e999"},
	} {
		for _, mode := range bothModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				var r CompositeSyncResponse
				err := r.DecodeHookResponse([]byte(tc.body), mode)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want it to contain %q", err, tc.want)
				}
			})
		}
	}
}

func TestDecoratorDecode(t *testing.T) {
	body := `{"labels":{"set":"v","remove":null},"annotations":{"gone":null},` +
		`"attachments":[` + childCM + `],"resyncAfterSeconds":2}`
	for _, mode := range bothModes {
		t.Run(string(mode), func(t *testing.T) {
			var r DecoratorSyncResponse
			if err := r.DecodeHookResponse([]byte(body), mode); err != nil {
				t.Fatal(err)
			}
			if v, ok := r.Labels["set"]; !ok || v == nil || *v != "v" {
				t.Errorf("labels[set] = %v, %v", v, ok)
			}
			if v, ok := r.Labels["remove"]; !ok || v != nil {
				t.Errorf("labels[remove] = %v, %v; want present and nil", v, ok)
			}
			if _, ok := r.Labels["absent"]; ok {
				t.Error("labels[absent] present")
			}
			if v, ok := r.Annotations["gone"]; !ok || v != nil {
				t.Errorf("annotations[gone] = %v, %v; want present and nil", v, ok)
			}
			if !r.StatusUnchanged() {
				t.Errorf("absent status: StatusUnchanged() = false, status %#v", r.Status)
			}
			if len(r.Attachments) != 1 || r.Attachments[0].GetName() != "a" || r.ResyncAfterSeconds != 2 {
				t.Errorf("got %+v", r)
			}
		})
	}
}

func TestDecoratorStatus(t *testing.T) {
	for _, tc := range []struct {
		body      string
		unchanged bool
		want      map[string]any
	}{
		{`{"status":null}`, true, nil},
		{`{}`, true, nil},
		{`{"status":{}}`, false, map[string]any{}},
		{`{"status":{"a":1}}`, false, map[string]any{"a": int64(1)}},
	} {
		var r DecoratorSyncResponse
		if err := r.DecodeHookResponse([]byte(tc.body), strict); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if r.StatusUnchanged() != tc.unchanged {
			t.Errorf("%s: StatusUnchanged() = %v", tc.body, r.StatusUnchanged())
		}
		if diff := cmp.Diff(tc.want, r.Status); diff != "" {
			t.Errorf("%s: %s", tc.body, diff)
		}
	}
	var r DecoratorSyncResponse
	if err := r.DecodeHookResponse([]byte(`{"status":"x"}`), loose); err == nil {
		t.Error("string status accepted")
	}
	if err := r.DecodeHookResponse([]byte(`{"attachments":[{"kind":"X"}]}`), loose); err == nil || !strings.Contains(err.Error(), "attachments[0]") {
		t.Errorf("err = %v, want it to name attachments[0]", err)
	}
	if err := r.DecodeHookResponse([]byte(`{"labels":{"a":1}}`), loose); err == nil {
		t.Error("numeric label value accepted")
	}
	if err := r.DecodeHookResponse([]byte(`{"label":{}}`), strict); err == nil || !strings.Contains(err.Error(), `"label"`) {
		t.Errorf("strict: err = %v, want it to name label", err)
	}
}

func TestCustomizeDecode(t *testing.T) {
	body := `{"relatedResources":[{"apiVersion":"v1","resource":"configmaps","labelSelector":{"matchLabels":{"a":"b"}}},` +
		`{"apiVersion":"v1","resource":"secrets","namespace":"ns","names":["s1"]}]}`
	var r CustomizeResponse
	if err := r.DecodeHookResponse([]byte(body), strict); err != nil {
		t.Fatal(err)
	}
	if len(r.RelatedResources) != 2 || r.RelatedResources[0].LabelSelector.MatchLabels["a"] != "b" || r.RelatedResources[1].Names[0] != "s1" {
		t.Errorf("got %+v", r)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"names with selector", `{"relatedResources":[{"apiVersion":"v1","resource":"secrets","names":["a"],"labelSelector":{}}]}`, "relatedResources[0].names"},
		{"missing resource", `{"relatedResources":[{"apiVersion":"v1"}]}`, "relatedResources[0].resource"},
		{"null rule", `{"relatedResources":[null]}`, "relatedResources[0].apiVersion"},
	} {
		if err := r.DecodeHookResponse([]byte(tc.body), loose); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}

	// Strict mode checks the typed rules too; loose mode ignores extras.
	extra := []byte(`{"relatedResources":[{"apiVersion":"v1","resource":"pods","labelSelectr":{}}]}`)
	if err := r.DecodeHookResponse(extra, strict); err == nil || !strings.Contains(err.Error(), "labelSelectr") {
		t.Errorf("strict: err = %v", err)
	}
	if err := r.DecodeHookResponse(extra, loose); err != nil {
		t.Errorf("loose: %v", err)
	}
}

// The decode mode must follow v1alpha1.SetDefaults_Hook.
func TestResponseModeMatchesDefaults(t *testing.T) {
	v1, v2 := v1alpha1.HookVersionV1, v1alpha1.HookVersionV2
	for _, version := range []*v1alpha1.HookVersion{nil, &v1, &v2} {
		for _, mode := range []*v1alpha1.ResponseUnMarshallMode{nil, new(loose), new(strict)} {
			hook := &v1alpha1.Hook{Version: version, Webhook: &v1alpha1.Webhook{ResponseUnMarshallMode: mode}}
			defaulted := hook.DeepCopy()
			v1alpha1.SetDefaults_Hook(defaulted)
			if got, want := ResponseMode(hook), *defaulted.Webhook.ResponseUnMarshallMode; got != want {
				t.Errorf("version %v mode %v: got %s, SetDefaults_Hook gives %s", version, mode, got, want)
			}
			if got, want := Timeout(hook.Webhook), defaulted.Webhook.Timeout.Duration; got != want {
				t.Errorf("timeout: got %s, SetDefaults_Hook gives %s", got, want)
			}
		}
	}
}

func TestLooseDecodeListsUnknownKeys(t *testing.T) {
	var r CompositeSyncResponse
	body := `{"status":{},"childern":[` + childCM + `],"resyncAfter":3,"zzz":1,"finalized":false}`
	if err := r.DecodeHookResponse([]byte(body), loose); err != nil {
		t.Fatal(err)
	}
	want := []UnknownField{{Key: "childern", Suggestion: "children"}, {Key: "resyncAfter", Suggestion: "resyncAfterSeconds"}, {Key: "zzz"}}
	if diff := cmp.Diff(want, r.UnknownFields); diff != "" {
		t.Errorf("unknown fields (-want +got):\n%s", diff)
	}
	if !r.ChildrenAbsent || len(r.Children) != 0 {
		t.Errorf("ChildrenAbsent = %v, children %v: want absent, none", r.ChildrenAbsent, r.Children)
	}
	if got := r.UnknownFields[0].String(); got != `"childern" (did you mean "children"?)` {
		t.Errorf("String() = %s", got)
	}
	if got := r.UnknownFields[2].String(); got != `"zzz"` {
		t.Errorf("String() = %s", got)
	}

	var d DecoratorSyncResponse
	if err := d.DecodeHookResponse([]byte(`{"label":{"a":"b"},"attachements":[]}`), loose); err != nil {
		t.Fatal(err)
	}
	want = []UnknownField{{Key: "label", Suggestion: "labels"}, {Key: "attachements", Suggestion: "attachments"}}
	if diff := cmp.Diff(want, d.UnknownFields); diff != "" {
		t.Errorf("decorator unknown fields (-want +got):\n%s", diff)
	}
	if !d.AttachmentsAbsent {
		t.Error("AttachmentsAbsent = false")
	}

	// Keys inside the values are the hook's business.
	if err := r.DecodeHookResponse([]byte(`{"status":{"childern":1},"children":[`+childCM+`]}`), loose); err != nil || r.UnknownFields != nil {
		t.Errorf("unknown fields %v, err %v: want none", r.UnknownFields, err)
	}
}

func TestChildrenAbsent(t *testing.T) {
	for _, tc := range []struct {
		body   string
		absent bool
	}{
		{`{}`, true},
		{`{"children":null}`, false},
		{` {"status":{"children":[]}, "x":{"children":1}} `, true},
		{`{"status":{},"Children":[]}`, true},
		{`{"children":[]}`, false},
		{`{"children":[` + childCM + `]}`, false},
	} {
		for _, mode := range bothModes {
			var r CompositeSyncResponse
			if err := r.DecodeHookResponse([]byte(tc.body), mode); err != nil {
				if mode == strict {
					continue // Children is unknown in strict mode
				}
				t.Fatalf("%s %s: %v", mode, tc.body, err)
			}
			if r.ChildrenAbsent != tc.absent {
				t.Errorf("%s %s: ChildrenAbsent = %v, want %v", mode, tc.body, r.ChildrenAbsent, tc.absent)
			}
			var d DecoratorSyncResponse
			body := strings.ReplaceAll(strings.ReplaceAll(tc.body, "children", "attachments"), "Children", "Attachments")
			if err := d.DecodeHookResponse([]byte(body), mode); err != nil {
				continue
			}
			if d.AttachmentsAbsent != tc.absent {
				t.Errorf("%s %s: AttachmentsAbsent = %v, want %v", mode, body, d.AttachmentsAbsent, tc.absent)
			}
		}
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"status", "children", "resyncAfterSeconds", "finalized"}
	for key, want := range map[string]string{
		"childern":     "children",
		"childrens":    "children",
		"chidren":      "children",
		"Children":     "children",
		"CHILDREN":     "children",
		"child":        "children",
		"staus":        "status",
		"state":        "status",
		"resyncAfter":  "resyncAfterSeconds",
		"finalised":    "finalized",
		"finalize":     "finalized",
		"items":        "",
		"spec":         "",
		"resync":       "resyncAfterSeconds",
		"kids":         "",
		"descendants":  "",
		"":             "",
		"resyncBefore": "",
	} {
		if got := Suggest(key, keys); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", key, got, want)
		}
	}
}
