package plan

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDryRunMarksEveryWrite: each request whose method may write goes out
// with dryRun=All (replacing another value), its body intact but for a
// DELETE's, whose DeleteOptions get dryRun ["All"] (the API server reads
// a DELETE's options from its body), and is recorded with its answer;
// reads go out as they are, unrecorded.
func TestDryRunMarksEveryWrite(t *testing.T) {
	type seen struct{ method, dryRun, body string }
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, strings.Join(r.URL.Query()["dryRun"], ","), string(body)})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap"}`))
	}))
	defer srv.Close()
	d := &DryRun{}
	client := &http.Client{Transport: d.Wrap(http.DefaultTransport)}
	for _, method := range []string{"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"} {
		body := `{"a":1}`
		if method == "DELETE" {
			body = `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background","dryRun":[]}`
		}
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/namespaces/ns/configmaps/a?dryRun=None", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	for _, s := range got {
		write := IsWrite(s.method)
		if s.method == "DELETE" {
			if s.dryRun != "All" || s.body != `{"apiVersion":"v1","dryRun":["All"],"kind":"DeleteOptions","propagationPolicy":"Background"}` {
				t.Errorf("DELETE went out with dryRun=%q, body %s", s.dryRun, s.body)
			}
			continue
		}
		if write && (s.dryRun != "All" || s.body != `{"a":1}`) {
			t.Errorf("%s went out with dryRun=%q, body %q", s.method, s.dryRun, s.body)
		}
		if !write && s.dryRun != "None" {
			t.Errorf("%s was changed: dryRun=%q", s.method, s.dryRun)
		}
	}
	writes := d.Writes(0)
	if len(writes) != 4 {
		t.Fatalf("%d writes recorded, want 4: %+v", len(writes), writes)
	}
	for _, w := range writes {
		if w.Code != 200 || string(w.Response) != `{"kind":"ConfigMap"}` || w.Resource != "configmaps" || w.Namespace != "ns" || w.Name != "a" {
			t.Errorf("recorded %+v", w)
		}
	}
}

// TestDryRunDeleteBodies: a DELETE without a body gets DeleteOptions with
// dryRun ["All"]; a write whose body is not JSON (protobuf), or a DELETE
// whose body is not a JSON object, is refused and never sent.
func TestDryRunDeleteBodies(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.Header.Get("Content-Type")+" "+string(body))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	d := &DryRun{}
	client := &http.Client{Transport: d.Wrap(http.DefaultTransport)}
	do := func(method, path, body string) error {
		var r io.Reader = http.NoBody
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, r)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do("DELETE", "/api/v1/namespaces/ns/configmaps", ""); err != nil {
		t.Fatal(err)
	}
	if want := "DELETE application/json " + deleteOptionsDryRun; len(got) != 1 || got[0] != want {
		t.Fatalf("a DELETE without a body went out as %q, want %q", got, want)
	}
	for _, c := range []struct{ method, body string }{
		{"DELETE", "\x0ak8s\x00protobuf"},
		{"DELETE", `["not","an","object"]`},
		{"POST", "\x0ak8s\x00protobuf"},
		{"PUT", "\x0ak8s\x00protobuf"},
		{"PATCH", "\x0ak8s\x00protobuf"},
	} {
		if err := do(c.method, "/api/v1/namespaces/ns/configmaps/a", c.body); err == nil || !strings.Contains(err.Error(), "did not send") {
			t.Errorf("%s with body %q: %v, want refused", c.method, c.body, err)
		}
	}
	if len(got) != 1 {
		t.Errorf("refused writes reached the server: %q", got[1:])
	}
	if w := d.Writes(0); len(w) != 6 || w[5].Error == "" || w[5].Code != 0 {
		t.Errorf("refused writes not recorded with their error: %+v", w)
	}
}

func TestParsePath(t *testing.T) {
	for path, want := range map[string][6]string{
		"/api/v1/namespaces/ns/configmaps":                  {"", "v1", "configmaps", "ns", "", ""},
		"/api/v1/namespaces/ns/configmaps/a":                {"", "v1", "configmaps", "ns", "a", ""},
		"/apis/example.io/v1/namespaces/ns/things/a/status": {"example.io", "v1", "things", "ns", "a", "status"},
		"/apis/example.io/v1/clusterthings/a":               {"example.io", "v1", "clusterthings", "", "a", ""},
		"/api/v1/namespaces/ns":                             {"", "v1", "namespaces", "", "ns", ""},
		"/apis/apps/v1/namespaces/ns/deployments/d/scale":   {"apps", "v1", "deployments", "ns", "d", "scale"},
		"/version": {},
	} {
		g, v, r, ns, n, s := ParsePath(path)
		if got := [6]string{g, v, r, ns, n, s}; got != want {
			t.Errorf("ParsePath(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestSimulatedPatches: the writes to an object not yet created are
// answered from memory, merge and JSON patches alike, one after the other.
func TestSimulatedPatches(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.io/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a", "namespace": "ns", "uid": "u1"},
	}}
	s, err := newSimulated(obj, schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "things"})
	if err != nil {
		t.Fatal(err)
	}
	merge := &Write{Method: "PATCH", Group: "example.io", Version: "v1", Resource: "things", Namespace: "ns", Name: "a",
		ContentType: "application/merge-patch+json", Request: []byte(`{"metadata":{"finalizers":["f"]}}`)}
	if code, _, ok := s.write(merge); !ok || code != 200 {
		t.Fatalf("merge patch: %d %v", code, ok)
	}
	status := &Write{Method: "PATCH", Group: "example.io", Version: "v1", Resource: "things", Namespace: "ns", Name: "a", Subresource: "status",
		ContentType: "application/json-patch+json", Request: []byte(`[{"op":"test","path":"/metadata/uid","value":"u1"},{"op":"add","path":"/status","value":{"x":1}}]`)}
	code, body, ok := s.write(status)
	if !ok || code != 200 || !strings.Contains(string(body), `"finalizers":["f"]`) || !strings.Contains(string(body), `"status":{"x":1}`) {
		t.Fatalf("JSON patch: %d %v %s", code, ok, body)
	}
	other := *merge
	other.Name = "b"
	if _, _, ok := s.write(&other); ok {
		t.Error("a write of another object was simulated")
	}
	bad := *status
	bad.Request = []byte(`[{"op":"test","path":"/metadata/uid","value":"other"}]`)
	if code, _, ok := s.write(&bad); !ok || code != 422 {
		t.Errorf("a failed test: %d %v, want 422", code, ok)
	}
}

// TestDryRunRecreate: the create of an object a dry-run DELETE deleted is
// answered with the object sent (the API server, which still has it,
// would answer 409), not sent; after ForgetDeletes it is sent again.
func TestDryRunRecreate(t *testing.T) {
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = append(sent, r.Method)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	d := &DryRun{}
	client := &http.Client{Transport: d.Wrap(http.DefaultTransport)}
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}`
	do("DELETE", "/api/v1/namespaces/ns/configmaps/a", "")
	code, body := do("POST", "/api/v1/namespaces/ns/configmaps", cm)
	if code != 201 || !strings.Contains(body, `"namespace":"ns"`) || !strings.Contains(body, `"data":{"k":"v"}`) {
		t.Errorf("the create after the delete: %d %s", code, body)
	}
	if len(sent) != 1 {
		t.Errorf("requests sent: %v, want the DELETE alone", sent)
	}
	if w := d.Writes(0); len(w) != 2 || !w[1].Simulated {
		t.Errorf("writes: %+v", w)
	}
	do("POST", "/api/v1/namespaces/ns/configmaps", strings.Replace(cm, `"a"`, `"b"`, 1))
	d.ForgetDeletes()
	do("POST", "/api/v1/namespaces/ns/configmaps", cm)
	if len(sent) != 3 {
		t.Errorf("requests sent: %v, want the create of another object, and of a after ForgetDeletes", sent)
	}
}
