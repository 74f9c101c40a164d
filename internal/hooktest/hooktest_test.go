package hooktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// crd is the parent resource of the tests' controllers.
var crd = &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
	Group: "example.metactl.io", Scope: apiextensionsv1.NamespaceScoped,
	Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Kind: "Thing"},
	Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
		Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}}},
}}

// setup is a test's controller: which hooks it has and how they are set.
type setup struct {
	version   string // sync hook's version
	mode      string // responseUnMarshallMode
	timeout   string
	finalize  bool
	customize bool
	decorator bool
	method    string // the children's (attachments') update method; default InPlace
	// finalizeVersion is the finalize hook's version ("": unset).
	finalizeVersion string
	// resource is the decorated resource, "apiVersion resource" (""
	// example.metactl.io/v1 things).
	resource string
	// parent is the sample parent (nil: parentObject()).
	parent *unstructured.Unstructured
}

func controllerObject(t *testing.T, s setup, url string) *unstructured.Unstructured {
	t.Helper()
	webhook := func(path string) map[string]any {
		w := map[string]any{"url": url + path}
		if s.timeout != "" {
			w["timeout"] = s.timeout
		}
		if s.mode != "" {
			w["responseUnMarshallMode"] = s.mode
		}
		return w
	}
	sync := map[string]any{"webhook": webhook("/sync")}
	if s.version != "" {
		sync["version"] = s.version
	}
	hooks := map[string]any{"sync": sync}
	if s.finalize {
		hooks["finalize"] = map[string]any{"webhook": webhook("/finalize")}
		if s.finalizeVersion != "" {
			hooks["finalize"].(map[string]any)["version"] = s.finalizeVersion
		}
	}
	if s.customize {
		hooks["customize"] = map[string]any{"webhook": webhook("/customize")}
	}
	method := s.method
	if method == "" {
		method = "InPlace"
	}
	if s.decorator {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
			"metadata": map[string]any{"name": "test"},
			"spec": map[string]any{
				"resources":   []any{decorated(s.resource)},
				"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": method}}},
				"hooks":       hooks,
			},
		}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "test"},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "things"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": method}}},
			"hooks":            hooks,
		},
	}}
}

// decorated is a DecoratorController's resource rule for resource
// ("apiVersion resource"; "": example.metactl.io/v1 things).
func decorated(resource string) map[string]any {
	apiVersion, name, ok := strings.Cut(resource, " ")
	if !ok {
		apiVersion, name = "example.metactl.io/v1", "things"
	}
	return map[string]any{"apiVersion": apiVersion, "resource": name}
}

// request is what the tests' hooks read of a request.
type request struct {
	Path       string
	Parent     map[string]any            `json:"parent"`
	Object     map[string]any            `json:"object"`
	Children   map[string]map[string]any `json:"children"`
	Attach     map[string]map[string]any `json:"attachments"`
	Related    map[string]map[string]any `json:"related"`
	Finalizing bool                      `json:"finalizing"`
}

// given counts the children (attachments) of the request.
func (r *request) given() int {
	n := 0
	for _, m := range r.Children {
		n += len(m)
	}
	for _, m := range r.Attach {
		n += len(m)
	}
	return n
}

// good answers as a correct hook does: one ConfigMap, a status that
// counts the children it was given; finalized once none are left.
func good(r *request) (int, any) {
	switch r.Path {
	case "/customize":
		return 200, map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "names": []any{"creds"}}}}
	case "/finalize":
		list := "children"
		if r.Object != nil {
			list = "attachments"
		}
		return 200, map[string]any{list: []any{}, "finalized": r.given() == 0}
	}
	child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "thing-greeting"}, "data": map[string]any{"a": "b"}}
	if r.Object != nil {
		return 200, map[string]any{"attachments": []any{child}, "labels": map[string]any{"seen": "yes"}}
	}
	return 200, map[string]any{"status": map[string]any{"children": r.given()}, "children": []any{child}}
}

// hookServer serves answer at every path.
func hookServer(t *testing.T, answer func(r *request) (int, any)) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		var r request
		body, _ := io.ReadAll(hr.Body)
		if err := json.Unmarshal(body, &r); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.Path = hr.URL.Path
		code, out := answer(&r)
		if code == 0 {
			return // the answer was written (or the connection taken)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if raw, ok := out.(string); ok {
			_, _ = io.WriteString(w, raw)
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(s.Close)
	return s
}

func parentObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.metactl.io/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "thing", "namespace": "ns"},
		"spec":     map[string]any{"who": "World"},
	}}
}

func run(t *testing.T, s setup, answer func(r *request) (int, any)) *Report {
	t.Helper()
	srv := hookServer(t, answer)
	resources, _ := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{crd}, nil, "", "")
	parent := s.parent
	if parent == nil {
		parent = parentObject()
	}
	report, err := Run(context.Background(), Options{Controller: controllerObject(t, s, srv.URL), Parent: parent, Resources: resources})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return report
}

// only returns the findings of check, failing the test when there are
// none, or findings of another check (but those allowed).
func only(t *testing.T, r *Report, check string, sev Severity, allowed ...string) []Finding {
	t.Helper()
	var out []Finding
	for _, f := range r.Findings {
		if slices.Contains(allowed, f.Check) {
			continue
		}
		if f.Check != check || f.Severity != sev {
			t.Errorf("unexpected finding: %s %s: %s", f.Severity, f.Check, f.Message)
			continue
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		t.Fatalf("no %s finding %q; report:\n%s", sev, check, text(r))
	}
	return out
}

func text(r *Report) string {
	var b strings.Builder
	_ = r.WriteText(&b)
	return b.String()
}

func TestCleanHooksHaveNoFindings(t *testing.T) {
	for name, s := range map[string]setup{
		"composite":             {finalize: true, customize: true},
		"composite v2":          {version: "v2", finalize: true},
		"decorator":             {decorator: true, finalize: true},
		"composite no finalize": {},
	} {
		t.Run(name, func(t *testing.T) {
			r := run(t, s, good)
			if len(r.Findings) != 0 || r.Errors != 0 {
				t.Fatalf("findings for a correct hook:\n%s", text(r))
			}
			sent := 0
			for _, q := range r.Requests {
				if !q.OK && q.Sent > 0 {
					t.Errorf("request %s not ok", q.Name)
				}
				sent += q.Sent
			}
			if sent < 6 {
				t.Errorf("only %d calls:\n%s", sent, text(r))
			}
		})
	}
}

// TestRequests checks what the requests carry: an entry for every
// declared resource even when empty, the hook's own children handed
// back with uid and owner reference, keys of the hook's version, a
// child being deleted, related objects empty and present, finalizing.
func TestRequests(t *testing.T) {
	for _, version := range []string{"v1", "v2"} {
		t.Run(version, func(t *testing.T) {
			var got []request
			run(t, setup{version: version, finalize: true, customize: true}, func(r *request) (int, any) {
				got = append(got, *r)
				return good(r)
			})
			var (
				emptyEntry, ownChildren, deleting, relatedEmpty, relatedPresent, finalizingNone, finalizingSome bool
			)
			for _, r := range got {
				if r.Path == "/customize" {
					continue
				}
				// The finalize hook keys by its own version (v1 here).
				wantKey := "thing-greeting"
				if version == "v2" && r.Path == "/sync" {
					wantKey = "ns/thing-greeting"
				}
				cms, ok := r.Children["ConfigMap.v1"]
				if !ok {
					t.Fatalf("a request without the ConfigMap.v1 entry: %+v", r.Children)
				}
				if len(cms) == 0 && !r.Finalizing {
					emptyEntry = true
					if _, ok := r.Parent["status"]; ok {
						t.Errorf("the first request's parent has a status")
					}
				}
				if cm, ok := cms[wantKey].(map[string]any); ok {
					meta := cm["metadata"].(map[string]any)
					refs, _ := meta["ownerReferences"].([]any)
					if meta["uid"] == nil || len(refs) != 1 || meta["namespace"] != "ns" {
						t.Errorf("own child not as the reconciler hands it back: %v", meta)
					}
					ownChildren = true
					if meta["deletionTimestamp"] != nil {
						deleting = true
					}
					if r.Finalizing {
						finalizingSome = true
					}
				} else if len(cms) > 0 {
					t.Errorf("children keyed %v, want %q", cms, wantKey)
				}
				if r.Finalizing && len(cms) == 0 {
					finalizingNone = true
				}
				secrets, ok := r.Related["Secret.v1"]
				switch {
				case !ok:
					t.Errorf("a request without the related Secret.v1 entry: %v", r.Related)
				case len(secrets) == 0:
					relatedEmpty = true
				default:
					relatedPresent = true
				}
			}
			for what, ok := range map[string]bool{"empty entry": emptyEntry, "own children": ownChildren, "child being deleted": deleting,
				"related empty": relatedEmpty, "related present": relatedPresent, "finalizing, no children": finalizingNone, "finalizing with children": finalizingSome} {
				if !ok {
					t.Errorf("no request with %s", what)
				}
			}
		})
	}
}

// TestFinalizingParentHasFinalizer: the parent of a finalize request
// carries the finalizer metactl puts on the parents of its kind, being
// deleted.
func TestFinalizingParentHasFinalizer(t *testing.T) {
	for s, want := range map[setup]string{
		{finalize: true}:                  "metacontroller.io/compositecontroller-test",
		{finalize: true, decorator: true}: "metacontroller.io/decoratorcontroller-test",
	} {
		t.Run(want, func(t *testing.T) {
			finalizing := 0
			run(t, s, func(r *request) (int, any) {
				if r.Finalizing {
					parent := r.Parent
					if parent == nil {
						parent = r.Object
					}
					meta, _ := parent["metadata"].(map[string]any)
					finalizers, _ := meta["finalizers"].([]any)
					if !slices.Contains(finalizers, any(want)) || meta["deletionTimestamp"] == nil {
						t.Errorf("finalizing parent's metadata %v, want finalizer %s and a deletionTimestamp", meta, want)
					}
					finalizing++
				}
				return good(r)
			})
			if finalizing == 0 {
				t.Fatal("no finalize request")
			}
		})
	}
}

// TestRecreate: a child of a Recreate resource that the hook changes is
// deleted in one round and created again in the next, as
// children.Writer.Manage does: the request between them carries no child.
func TestRecreate(t *testing.T) {
	var got []request
	r := run(t, setup{method: "Recreate"}, func(r *request) (int, any) {
		got = append(got, *r)
		value := "first"
		if r.Parent["status"] != nil {
			value = "later"
		}
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "thing-greeting"}, "data": map[string]any{"a": value}}
		return 200, map[string]any{"status": map[string]any{"seen": true}, "children": []any{child}}
	})
	if len(r.Findings) != 0 {
		t.Fatalf("findings:\n%s", text(r))
	}
	// Each request is sent twice: the rounds' requests are got[0], [2], ...
	var values []string
	for i := 0; i < len(got); i += 2 {
		if got[i].Finalizing {
			break
		}
		value := "-"
		if cm, ok := got[i].Children["ConfigMap.v1"]["thing-greeting"].(map[string]any); ok {
			value, _ = cm["data"].(map[string]any)["a"].(string)
			if cm["metadata"].(map[string]any)["deletionTimestamp"] != nil {
				value += " (deleting)"
			}
		}
		values = append(values, value)
	}
	// no-children, own-children-1 (the first child), own-children-2
	// (deleted: none), own-children-3 (created again), child-deleting.
	want := []string{"-", "first", "-", "later", "later (deleting)"}
	if !slices.Equal(values, want) {
		t.Errorf("the requests carry the child %q, want %q:\n%s", values, want, text(r))
	}
}

func TestHTTPStatus(t *testing.T) {
	r := run(t, setup{}, func(r *request) (int, any) {
		if r.given() > 0 {
			return 500, "boom"
		}
		return good(r)
	})
	f := only(t, r, CheckHTTPStatus, Error)
	if !strings.Contains(f[0].Message, "500") || f[0].Fix == "" {
		t.Errorf("finding %+v", f[0])
	}
}

func TestUnreachable(t *testing.T) {
	r := run(t, setup{}, func(r *request) (int, any) {
		if r.given() > 0 {
			panic(http.ErrAbortHandler) // the connection is closed: a crash
		}
		return good(r)
	})
	only(t, r, CheckUnreachable, Error)
}

func TestNoRequestReachesTheHook(t *testing.T) {
	srv := hookServer(t, good)
	srv.Close()
	resources, _ := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{crd}, nil, "", "")
	_, err := Run(context.Background(), Options{Controller: controllerObject(t, setup{}, srv.URL), Parent: parentObject(), Resources: resources})
	if se, ok := errors.AsType[*SetupError](err); !ok {
		t.Fatalf("error %v, want a *SetupError", err)
	} else if !strings.Contains(se.Error(), "no request reached the hook") {
		t.Errorf("error %v", se)
	}
}

func TestServiceHookNeedsHookURL(t *testing.T) {
	obj := controllerObject(t, setup{}, "")
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{"service": map[string]any{"name": "svc", "namespace": "ns"}, "path": "/sync"}, "spec", "hooks", "sync", "webhook")
	resources, _ := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{crd}, nil, "", "")
	_, err := Run(context.Background(), Options{Controller: obj, Parent: parentObject(), Resources: resources})
	if _, ok := errors.AsType[*SetupError](err); !ok || !strings.Contains(err.Error(), "--hook-url") {
		t.Fatalf("error %v, want a *SetupError naming --hook-url", err)
	}
	// With --hook-url as a base, the hook's own path is kept.
	var paths atomic.Value
	srv := hookServer(t, func(r *request) (int, any) { paths.Store(r.Path); return good(r) })
	report, err := Run(context.Background(), Options{Controller: obj, Parent: parentObject(), Resources: resources, HookURL: srv.URL})
	if err != nil || report.Errors != 0 {
		t.Fatalf("Run: %v %v", err, report)
	}
	if p := paths.Load(); p != "/sync" {
		t.Errorf("called at %v, want /sync", p)
	}
}

func TestTimeout(t *testing.T) {
	r := run(t, setup{timeout: "300ms"}, func(r *request) (int, any) {
		time.Sleep(time.Second)
		return good(r)
	})
	f := only(t, r, CheckTimeout, Error)
	if !strings.Contains(f[0].Message, "300ms") {
		t.Errorf("message %q does not name the timeout", f[0].Message)
	}
}

func TestInvalidJSON(t *testing.T) {
	only(t, run(t, setup{}, func(r *request) (int, any) { return 200, `{"children": [` }), CheckInvalidJSON, Error)
}

func TestNotAnObject(t *testing.T) {
	for _, body := range []string{"null", "[]", `"ok"`} {
		t.Run(body, func(t *testing.T) {
			only(t, run(t, setup{}, func(r *request) (int, any) { return 200, body }), CheckNotObject, Error)
		})
	}
}

func misspelt(r *request) (int, any) {
	_, a := good(r)
	a.(map[string]any)["resyncAfter"] = 5
	return 200, a
}

func TestUnknownFieldsStrict(t *testing.T) {
	f := only(t, run(t, setup{version: "v2"}, misspelt), CheckUnknownFields, Error)
	if !strings.Contains(f[0].Message, "resyncAfter") {
		t.Errorf("message %q", f[0].Message)
	}
}

func TestUnknownFieldsLoose(t *testing.T) {
	r := run(t, setup{}, misspelt)
	f := only(t, r, CheckUnknownFields, Warning)
	if !strings.Contains(f[0].Message, `"resyncAfter" (did you mean "resyncAfterSeconds"?)`) {
		t.Errorf("message %q", f[0].Message)
	}
	if r.Errors != 0 {
		t.Errorf("errors for a loose answer with unknown fields")
	}
	// Exit code 0: the text says warn, not FAIL, of its requests.
	out := text(r)
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "warn sync      no-children") {
		t.Errorf("a request whose only finding is a warning, not printed warn:\n%s", out)
	}
}

func TestStatusNotAnObject(t *testing.T) {
	only(t, run(t, setup{}, func(r *request) (int, any) {
		return 200, map[string]any{"status": "fine", "children": []any{}}
	}), CheckStatusNotObject, Error)
}

func TestInvalidAnswer(t *testing.T) {
	only(t, run(t, setup{}, func(r *request) (int, any) {
		return 200, map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}}}
	}), CheckInvalidAnswer, Error)
}

func TestAbsentList(t *testing.T) {
	only(t, run(t, setup{}, func(r *request) (int, any) {
		code, a := good(r)
		if r.given() > 0 {
			delete(a.(map[string]any), "children")
		}
		return code, a
	}), CheckAbsentList, Error)
}

func TestInvalidChildren(t *testing.T) {
	for name, child := range map[string]map[string]any{
		"another namespace":   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "other"}},
		"undeclared resource": {"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "x"}},
		"invalid name":        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a/b"}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, decorator := range []bool{false, true} {
				list := "children"
				if decorator {
					list = "attachments"
				}
				f := only(t, run(t, setup{decorator: decorator}, func(r *request) (int, any) {
					return 200, map[string]any{list: []any{child}}
				}), CheckInvalidChildren, Error)
				if !strings.HasPrefix(f[0].Message, list+"[0] (") {
					t.Errorf("message %q is not the reconciler's", f[0].Message)
				}
			}
		})
	}
}

func TestNondeterministic(t *testing.T) {
	var calls atomic.Int64
	f := only(t, run(t, setup{}, func(r *request) (int, any) {
		_, a := good(r)
		a.(map[string]any)["status"] = map[string]any{"call": calls.Add(1)}
		return 200, a
	}), CheckNondeterministic, Error, CheckNotFixedPoint)
	if len(f[0].Diff) == 0 || f[0].Diff[0].Path != ".status.call" {
		t.Errorf("diff %v, want .status.call", f[0].Diff)
	}
}

// TestChildrenComparedAsSets: the same children in another order are
// the same answer.
func TestChildrenComparedAsSets(t *testing.T) {
	var calls atomic.Int64
	r := run(t, setup{}, func(r *request) (int, any) {
		a := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}}
		b := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "b"}}
		list := []any{a, b}
		if calls.Add(1)%2 == 0 {
			list = []any{b, a}
		}
		return 200, map[string]any{"children": list}
	})
	if len(r.Findings) != 0 {
		t.Fatalf("findings:\n%s", text(r))
	}
}

func TestNotFinalized(t *testing.T) {
	only(t, run(t, setup{finalize: true}, func(r *request) (int, any) {
		code, a := good(r)
		if r.Path == "/finalize" {
			a.(map[string]any)["finalized"] = false
		}
		return code, a
	}), CheckNotFinalized, Error)
}

func TestNotFixedPoint(t *testing.T) {
	r := run(t, setup{}, func(r *request) (int, any) {
		_, a := good(r)
		seen, _ := r.Parent["status"].(map[string]any)
		n, _ := seen["rounds"].(float64)
		a.(map[string]any)["status"] = map[string]any{"rounds": n + 1}
		return 200, a
	})
	f := only(t, r, CheckNotFixedPoint, Warning)
	if len(f[0].Diff) == 0 || f[0].Diff[0].Path != ".status.rounds" {
		t.Errorf("diff %v", f[0].Diff)
	}
	if r.Errors != 0 {
		t.Errorf("a warning counted as an error")
	}
	out := text(r)
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "warn sync      "+f[0].Requests[0]) {
		t.Errorf("the request of a not-fixed-point warning not printed warn:\n%s", out)
	}
	for _, q := range r.Requests {
		if q.Name == f[0].Requests[0] && q.OK {
			t.Errorf("request %s ok, with a finding naming it", q.Name)
		}
	}
}

func TestRelatedResources(t *testing.T) {
	r := run(t, setup{customize: true}, func(r *request) (int, any) {
		if r.Path == "/customize" {
			return 200, map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "sekrets"}}}
		}
		return good(r)
	})
	f := only(t, r, CheckRelatedResources, Error)
	if !strings.Contains(f[0].Message, "sekrets") {
		t.Errorf("message %q", f[0].Message)
	}
	// An invalid rule is refused as the reconciler refuses it.
	r = run(t, setup{customize: true}, func(r *request) (int, any) {
		if r.Path == "/customize" {
			return 200, map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "names": []any{"a"},
				"labelSelector": map[string]any{"matchLabels": map[string]any{"a": "b"}}}}}
		}
		return good(r)
	})
	f = only(t, r, CheckRelatedResources, Error)
	if f[0].Hook != "customize" || !strings.Contains(f[0].Message, "names") {
		t.Errorf("finding of the %s hook", f[0].Hook)
	}
}

// TestRelatedKeyedForEachHook: the finalize requests key related objects
// by the finalize hook's version, as the engine does, not the sync hook's.
func TestRelatedKeyedForEachHook(t *testing.T) {
	var mu sync.Mutex
	keys := map[string][]string{}
	run(t, setup{customize: true, finalize: true, version: "v1", finalizeVersion: "v2"}, func(r *request) (int, any) {
		mu.Lock()
		for k := range r.Related["Secret.v1"] {
			keys[r.Path] = append(keys[r.Path], k)
		}
		mu.Unlock()
		return good(r)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(keys["/sync"]) == 0 || len(keys["/finalize"]) == 0 {
		t.Fatalf("related keys by hook: %v; want some for /sync and /finalize", keys)
	}
	for _, k := range keys["/sync"] {
		if k != "creds" {
			t.Errorf("the v1 sync hook got related key %q, want creds", k)
		}
	}
	for _, k := range keys["/finalize"] {
		if k != "ns/creds" {
			t.Errorf("the v2 finalize hook got related key %q, want ns/creds", k)
		}
	}
}

// TestDecoratedBuiltInObjectKeepsItsStatus: a decorator of a built-in
// object is given the object's own status in every request, as the engine
// gives it, not the status it answered (which the engine keeps in the
// metactl.io/status annotation).
func TestDecoratedBuiltInObjectKeepsItsStatus(t *testing.T) {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "team-a"}, "status": map[string]any{"phase": "Active"}}}
	var calls atomic.Int64
	report := run(t, setup{decorator: true, resource: "v1 namespaces", parent: ns}, func(r *request) (int, any) {
		if r.Path == "/sync" {
			calls.Add(1)
			if st, _ := r.Object["status"].(map[string]any); len(st) != 1 || st["phase"] != "Active" {
				return 500, fmt.Sprintf("object.status %v, want the namespace's own {phase: Active}", r.Object["status"])
			}
			return 200, map[string]any{"attachments": []any{}, "status": map[string]any{"seen": "yes"}}
		}
		return good(r)
	})
	for _, f := range report.Findings {
		t.Errorf("finding %s %s: %s", f.Severity, f.Check, f.Message)
	}
	if n := calls.Load(); n < 4 {
		t.Errorf("%d sync calls, want at least 4 (each request sent twice; the status answered calls again)", n)
	}
}

// TestJSONReport: the JSON report has every documented field.
func TestJSONReport(t *testing.T) {
	r := run(t, setup{}, misspelt)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = yaml.Unmarshal(b, &m)
	for _, k := range []string{"kind", "controller", "resources", "hooks", "requests", "findings", "errors", "warnings"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
	}
	if !strings.Contains(string(b), fmt.Sprintf(`"check":%q`, CheckUnknownFields)) {
		t.Errorf("no finding in %s", b)
	}
}

// TestParentWithoutSelector: a parent metactl could not sync (no
// spec.selector, no generateSelector) stops the test.
func TestParentWithoutSelector(t *testing.T) {
	srv := hookServer(t, good)
	obj := controllerObject(t, setup{}, srv.URL)
	unstructured.RemoveNestedField(obj.Object, "spec", "generateSelector")
	resources, _ := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{crd}, nil, "", "")
	_, err := Run(context.Background(), Options{Controller: obj, Parent: parentObject(), Resources: resources})
	if _, ok := errors.AsType[*SetupError](err); !ok || !strings.Contains(err.Error(), "spec.selector") {
		t.Fatalf("error %v, want a *SetupError about spec.selector", err)
	}
}

// TestHookURLWithPath: a --hook-url with a path is the sync and finalize
// hooks' address as it is.
func TestHookURLWithPath(t *testing.T) {
	var paths sync.Map
	srv := hookServer(t, func(r *request) (int, any) {
		paths.Store(r.Path, true)
		if r.Finalizing {
			return 200, map[string]any{"children": []any{}, "finalized": true}
		}
		return good(r)
	})
	resources, _ := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{crd}, nil, "", "")
	report, err := Run(context.Background(), Options{Controller: controllerObject(t, setup{finalize: true}, "http://127.0.0.1:1"), Parent: parentObject(),
		Resources: resources, HookURL: srv.URL + "/hook"})
	if err != nil || report.Errors != 0 {
		t.Fatalf("Run: %v\n%s", err, text(report))
	}
	var got []string
	paths.Range(func(k, _ any) bool { got = append(got, k.(string)); return true })
	if len(got) != 1 || got[0] != "/hook" {
		t.Errorf("called at %v, want /hook only", got)
	}
}

// TestOfflineResources: CRDs give kind and scope, the built-in table the
// common resources, and a parent kind known from neither is taken from
// the sample, as namespaced, with a note.
func TestOfflineResources(t *testing.T) {
	cluster := crd.DeepCopy()
	cluster.Spec.Scope = apiextensionsv1.ClusterScoped
	resources, notes := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{cluster}, nil, "", "")
	ctx := context.Background()
	if r, err := resources.Get(ctx, "example.metactl.io/v1", "things"); err != nil || r.Kind != "Thing" || r.Namespaced || !r.HasStatus {
		t.Errorf("things: %+v %v", r, err)
	}
	if r, err := resources.Get(ctx, "apps/v1", "deployments"); err != nil || r.Kind != "Deployment" || !r.Namespaced {
		t.Errorf("deployments: %+v %v", r, err)
	}
	if len(notes) != 0 {
		t.Errorf("notes %v", notes)
	}
	sample := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "other.io/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}}}
	resources, notes = OfflineResources(nil, sample, "other.io/v1", "widgets")
	if r, err := resources.Get(ctx, "other.io/v1", "widgets"); err != nil || r.Kind != "Widget" || !r.Namespaced {
		t.Errorf("widgets: %+v %v", r, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "--crd") {
		t.Errorf("notes %v", notes)
	}
	if _, err := resources.Get(ctx, "other.io/v1", "gadgets"); err == nil {
		t.Errorf("an unknown resource resolved")
	}
}

// TestUnresolvedResourceSaysHowToFix: a controller whose parent resource
// is not known stops the test with the resolver's message and how to make
// the resource known.
func TestUnresolvedResourceSaysHowToFix(t *testing.T) {
	controller := controllerObject(t, setup{}, "http://127.0.0.1:1")
	for offline, want := range map[bool]string{true: "pass the resource's CustomResourceDefinition with --crd FILE", false: "kubectl apply -f crd.yaml"} {
		resources, _ := OfflineResources(nil, nil, "", "")
		_, err := Run(context.Background(), Options{Controller: controller, Resources: resources, Offline: offline})
		var se *SetupError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), `serves no resource "things"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("offline %v: %v; want a SetupError naming things and %q", offline, err, want)
		}
	}
}

// TestFinalizeRounds: a finalize hook that asks for an audit ConfigMap and
// is finalized once it is given it back passes (hook test writes what it
// asks for and calls it again, as the engine does); one that never
// finalizes fails not-finalized once it asks for no change.
func TestFinalizeRounds(t *testing.T) {
	audit := func(r *request) (int, any) {
		if r.Path != "/finalize" {
			return good(r)
		}
		_, has := r.Children["ConfigMap.v1"]["thing-audit"]
		child := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "thing-audit"}}
		return 200, map[string]any{"children": []any{child}, "finalized": has}
	}
	if r := run(t, setup{finalize: true}, audit); len(r.Findings) != 0 {
		t.Errorf("a finalize hook that waits for its audit child: findings:\n%s", text(r))
	}
	f := only(t, run(t, setup{finalize: true}, func(r *request) (int, any) {
		code, a := audit(r)
		if r.Path == "/finalize" {
			a.(map[string]any)["finalized"] = false
		}
		return code, a
	}), CheckNotFinalized, Error)
	if !strings.Contains(f[0].Message, "asks for no change (after 2 calls") {
		t.Errorf("message %q does not say it settled unfinalized", f[0].Message)
	}
}
