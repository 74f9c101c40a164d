package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
)

// request is a recorded sync request whose controller has its sync hook
// at /sync and its customize hook at /customize.
const request = `{"controller":{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"hello"},
"spec":{"hooks":{"sync":{"webhook":{"url":"http://10.0.0.1:8080/sync"}},"customize":{"webhook":{"service":{"name":"h"},"path":"/customize"}}}}},
"parent":{"apiVersion":"example.metactl.io/v1","kind":"HelloWorld","metadata":{"name":"a","namespace":"default"}},"children":{"ConfigMap.v1":{}},"related":{},"finalizing":false}`

// recordedAnswer is what the hook answered when recorded: two children
// and a status.
const recordedAnswer = `{"status":{"greeting":"Hello, World!","count":2},"children":[
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-one"},"data":{"greeting":"Hello, World!"}},
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-two"},"data":{"greeting":"Hello, World!"}}]}`

// writeSet writes a recorded set of calls into a new directory.
func writeSet(t *testing.T, calls ...hookrecord.Call) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "recorded")
	for i := range calls {
		if calls[i].Controller == "" {
			calls[i].Controller = "compositecontroller/hello"
		}
		if calls[i].Object == "" {
			calls[i].Object = "default/a"
		}
	}
	if err := hookrecord.WriteDir(dir, 1, calls); err != nil {
		t.Fatal(err)
	}
	return dir
}

func syncCall(answer string) hookrecord.Call {
	return hookrecord.Call{Hook: "sync", Request: json.RawMessage(request), Code: 200, Response: json.RawMessage(answer)}
}

// hook serves answer (200, JSON) on every path, and records the paths
// and bodies asked.
type hook struct {
	*httptest.Server
	paths  []string
	bodies []string
}

func newHook(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.paths, h.bodies = append(h.paths, r.URL.Path), append(h.bodies, string(body))
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a POST of JSON", http.StatusBadRequest)
			return
		}
		handle(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func answering(answer string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}
}

func run(t *testing.T, dir string, opts Options) *Report {
	t.Helper()
	r, err := Run(context.Background(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func only(t *testing.T, r *Report) Result {
	t.Helper()
	if len(r.Results) != 1 {
		t.Fatalf("want one result, got %+v", r.Results)
	}
	return r.Results[0]
}

func changeLines(res Result) string {
	var lines []string
	for _, c := range res.Changes {
		lines = append(lines, c.String())
	}
	return strings.Join(lines, "\n")
}

// TestSameAnswerReordered: the same answer with its keys and children in
// another order, numbers written otherwise, is the same; the request
// reaches the hook as recorded, at the path of the recorded controller.
func TestSameAnswerReordered(t *testing.T) {
	h := newHook(t, answering(`{"children":[
{"metadata":{"name":"a-two"},"kind":"ConfigMap","apiVersion":"v1","data":{"greeting":"Hello, World!"}},
{"data":{"greeting":"Hello, World!"},"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-one"}}],
"status":{"count":2.0,"greeting":"Hello, World!"}}`))
	dir := writeSet(t, syncCall(recordedAnswer))
	res := only(t, run(t, dir, Options{HookURL: h.URL}))
	if res.Status != Same || len(res.Changes) != 0 {
		t.Fatalf("reordered answer: %s %s\n%s", res.Status, res.Reason, changeLines(res))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(request)); err != nil {
		t.Fatal(err)
	}
	if len(h.paths) != 1 || h.paths[0] != "/sync" || h.bodies[0] != compact.String() {
		t.Errorf("hook was asked %v, body as recorded: %v", h.paths, h.bodies[0] == compact.String())
	}
	if res.URL != h.URL+"/sync" {
		t.Errorf("URL = %q, want %q", res.URL, h.URL+"/sync")
	}
}

// TestChangedFieldDiffers: a changed field of a child, a changed status
// and a child gone are differences, each named by its path, the child by
// its key.
func TestChangedFieldDiffers(t *testing.T) {
	h := newHook(t, answering(`{"status":{"greeting":"Hi, World!","count":2},"children":[
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-one"},"data":{"greeting":"Hi, World!"}}]}`))
	dir := writeSet(t, syncCall(recordedAnswer))
	r := run(t, dir, Options{HookURL: h.URL})
	res := only(t, r)
	want := `~ .children["v1/ConfigMap/a-one"].data.greeting: "Hello, World!" -> "Hi, World!"
- .children["v1/ConfigMap/a-two"]: {"apiVersion":"v1","data":{"greeting":"Hello, World!"},"kind":"ConfigMap","metadata":{"name":"a-two"}}
~ .status.greeting: "Hello, World!" -> "Hi, World!"`
	if res.Status != Differs || changeLines(res) != want {
		t.Fatalf("changed answer: %s\n%s\nwant differs:\n%s", res.Status, changeLines(res), want)
	}
	if r.Summary != (Summary{Calls: 1, Differs: 1}) {
		t.Errorf("summary %+v", r.Summary)
	}
	var out strings.Builder
	if err := r.Print(&out); err != nil {
		t.Fatal(err)
	}
	wantOut := "0001-sync.json  default/a  differs\n" +
		"    ~ .children[\"v1/ConfigMap/a-one\"].data.greeting: \"Hello, World!\" -> \"Hi, World!\"\n"
	if !strings.HasPrefix(out.String(), wantOut) || !strings.HasSuffix(out.String(), "\n1 call: 0 same, 1 differs, 0 failed, 0 skipped\n") {
		t.Errorf("Print:\n%s", out.String())
	}
}

// TestIgnore: changes at or below an ignored path are not differences.
func TestIgnore(t *testing.T) {
	h := newHook(t, answering(`{"status":{"greeting":"Hello, World!","count":3},"children":[
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-one","annotations":{"at":"now"}},"data":{"greeting":"Hello, World!"}},
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a-two"},"data":{"greeting":"Hello, World!"}}]}`))
	dir := writeSet(t, syncCall(recordedAnswer))
	res := only(t, run(t, dir, Options{HookURL: h.URL, Ignore: []string{".status.count", `.children["v1/ConfigMap/a-one"].metadata`}}))
	if res.Status != Same || res.Ignored != 2 {
		t.Errorf("ignored changes: %s, %d ignored\n%s", res.Status, res.Ignored, changeLines(res))
	}
	res = only(t, run(t, dir, Options{HookURL: h.URL, Ignore: []string{".status.co"}}))
	if res.Status != Differs || res.Ignored != 0 {
		t.Errorf("a path that is only a prefix of a key ignored a change: %s, %d ignored", res.Status, res.Ignored)
	}
}

// TestFailures: a 500, an answer that is not JSON, and no answer within
// the timeout are failures, each with its reason; none is a difference.
func TestFailures(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		handle       func(http.ResponseWriter, *http.Request)
	}{
		{"500", "HTTP 500 Internal Server Error: boom", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", 500) }},
		{"not JSON", "the answer is not JSON", answering(`{"status":`)},
		{"two values", "more than one JSON value", answering(`{} {}`)},
		{"timeout", "no answer within 200ms (--request-timeout)", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHook(t, tc.handle)
			dir := writeSet(t, syncCall(recordedAnswer))
			r := run(t, dir, Options{HookURL: h.URL, Timeout: 200 * time.Millisecond})
			res := only(t, r)
			if res.Status != Failed || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("%s: %s %q, want failed with %q", tc.name, res.Status, res.Reason, tc.reason)
			}
			if r.Reached() != 1 {
				t.Errorf("%s: the hook counts as not reached", tc.name)
			}
		})
	}
}

// TestUnreachable: a hook that is not listening fails the call, and
// counts as not reached.
func TestUnreachable(t *testing.T) {
	h := newHook(t, answering(recordedAnswer))
	url := h.URL
	h.Close()
	r := run(t, writeSet(t, syncCall(recordedAnswer)), Options{HookURL: url})
	if res := only(t, r); res.Status != Failed || r.Reached() != 0 || r.Sent() != 1 {
		t.Errorf("hook not listening: %s %q, reached %d", res.Status, res.Reason, r.Reached())
	}
}

// TestSkipped: a call recorded without an answer, and one whose hook has
// no URL, are skipped and not sent; --hook-url-for overrides --hook-url.
func TestSkipped(t *testing.T) {
	h := newHook(t, answering(recordedAnswer))
	failedCall := hookrecord.Call{Hook: "sync", Request: json.RawMessage(request), Code: 500, Error: "HTTP 500: boom"}
	customize := hookrecord.Call{Hook: "customize", Request: json.RawMessage(request), Code: 200, Response: json.RawMessage(`{"relatedResources":[]}`)}
	dir := writeSet(t, failedCall, customize, syncCall(recordedAnswer))
	r := run(t, dir, Options{HookURLFor: map[string]string{"sync": h.URL + "/other"}, HookURL: ""})
	got := []Status{r.Results[0].Status, r.Results[1].Status, r.Results[2].Status}
	if got[0] != Skipped || got[1] != Skipped || got[2] != Same {
		t.Fatalf("statuses %v, want skipped, skipped, same", got)
	}
	if !strings.Contains(r.Results[0].Reason, "recorded without an answer (HTTP 500: boom)") ||
		!strings.Contains(r.Results[1].Reason, "--hook-url-for customize=URL") {
		t.Errorf("reasons: %q, %q", r.Results[0].Reason, r.Results[1].Reason)
	}
	if len(h.paths) != 1 || h.paths[0] != "/other" {
		t.Errorf("hook asked at %v, want only /other (a URL with a path is used as given)", h.paths)
	}
	// --hook-url-for customize, with --hook-url for the rest: the customize call
	// goes to the recorded controller's customize path.
	h.paths = nil
	run(t, dir, Options{HookURL: "http://127.0.0.1:1", HookURLFor: map[string]string{"customize": h.URL, "sync": h.URL}})
	if len(h.paths) != 2 || h.paths[0] != "/customize" || h.paths[1] != "/sync" {
		t.Errorf("hook asked at %v, want /customize and /sync", h.paths)
	}
}

// TestSecretsAndNullLists: a Secret's data in the new answer is digested,
// never shown; digests are salted per process, so a recorded one (of
// another process) compares alike with any new one, and a Secret's values
// compare by their keys; a null list of children is an empty one.
func TestSecretsAndNullLists(t *testing.T) {
	// A digest salted by another process: not this one's of "c2VjcmV0".
	recorded := `{"children":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},
"data":{"password":"` + secretdigest.SaltedPrefix + strings.Repeat("0", 64) + `"}}]}`
	h := newHook(t, answering(`{"children":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"c2VjcmV0"}}]}`))
	res := only(t, run(t, writeSet(t, syncCall(recorded)), Options{HookURL: h.URL}))
	if res.Status != Same {
		t.Errorf("a Secret with the same keys, digested by two processes: %s\n%s", res.Status, changeLines(res))
	}
	h = newHook(t, answering(`{"children":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"token":"c2VjcmV0"}}]}`))
	res = only(t, run(t, writeSet(t, syncCall(recorded)), Options{HookURL: h.URL}))
	if res.Status != Differs || !strings.Contains(changeLines(res), "token") || strings.Contains(changeLines(res), "c2VjcmV0") {
		t.Fatalf("a Secret with another key compared as %s:\n%s", res.Status, changeLines(res))
	}
	if strings.Contains(changeLines(res), secretdigest.Salted("c2VjcmV0")) || strings.Contains(changeLines(res), secretdigest.Of("c2VjcmV0")) {
		t.Errorf("the changes show a digest of the new value:\n%s", changeLines(res))
	}

	h = newHook(t, answering(`{"status":{},"children":null}`))
	res = only(t, run(t, writeSet(t, syncCall(`{"status":{},"children":[]}`)), Options{HookURL: h.URL}))
	if res.Status != Same {
		t.Errorf("null children against []: %s\n%s", res.Status, changeLines(res))
	}
}

// TestUpdate: --update writes the new answer into the differing call's
// file, and the next replay finds it the same.
func TestUpdate(t *testing.T) {
	newAnswer := `{"status":{"greeting":"Hi"},"children":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"k":"plain"}}]}`
	h := newHook(t, answering(newAnswer))
	digested, err := hookrecord.DigestSecrets([]byte(newAnswer))
	if err != nil {
		t.Fatal(err)
	}
	dir := writeSet(t, syncCall(recordedAnswer), syncCall(string(digested)))
	r := run(t, dir, Options{HookURL: h.URL, Update: true})
	if r.Summary != (Summary{Calls: 2, Same: 1, Updated: 1}) {
		t.Fatalf("summary %+v", r.Summary)
	}
	data, err := os.ReadFile(filepath.Join(dir, "0001-sync.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "plain") || !strings.Contains(string(data), "sha256:") {
		t.Errorf("updated file holds the Secret's value, or no digest:\n%s", data)
	}
	if r := run(t, dir, Options{HookURL: h.URL}); r.Summary.Same != 2 {
		t.Errorf("after --update: %+v", r.Summary)
	}
}

func TestNoCalls(t *testing.T) {
	dir := t.TempDir()
	if _, err := Run(context.Background(), dir, Options{HookURL: "http://127.0.0.1:1"}); !errors.Is(err, ErrNoCalls) {
		t.Errorf("empty directory: %v, want ErrNoCalls", err)
	}
	if _, err := Run(context.Background(), filepath.Join(dir, "missing"), Options{HookURL: "http://127.0.0.1:1"}); err == nil {
		t.Error("missing directory: no error")
	}
	// A folder holding a set per controller, as metactl dev --record-dir
	// writes them: the error names them.
	parent := filepath.Dir(writeSet(t, syncCall(recordedAnswer)))
	if _, err := Run(context.Background(), parent, Options{HookURL: "http://127.0.0.1:1"}); !errors.Is(err, ErrNoCalls) || !strings.Contains(err.Error(), "in its folders recorded: give one of them") {
		t.Errorf("folder of sets: %v", err)
	}
}

// TestCancel: a cancelled context ends Run with its error, not a report.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) { cancel(); <-r.Context().Done() })
	if _, err := Run(ctx, writeSet(t, syncCall(recordedAnswer)), Options{HookURL: h.URL}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestRedirectNotFollowed: a hook answering a redirect fails the call with
// its status; the URL it points to is not contacted.
func TestRedirectNotFollowed(t *testing.T) {
	elsewhere := newHook(t, answering(recordedAnswer))
	h := newHook(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/sync", http.StatusTemporaryRedirect)
	})
	dir := writeSet(t, syncCall(recordedAnswer))
	res := only(t, run(t, dir, Options{HookURL: h.URL}))
	if res.Status != Failed || res.Code != http.StatusTemporaryRedirect || !strings.HasPrefix(res.Reason, "HTTP 307 Temporary Redirect") {
		t.Errorf("result = %+v; want failed: HTTP 307", res)
	}
	if len(elsewhere.paths) != 0 {
		t.Errorf("the redirect was followed to %v", elsewhere.paths)
	}
}

// TestFinalizeCallRouted: a recorded finalize call goes to --hook-url-for
// finalize's URL, at the path of the recorded controller's finalize hook;
// the sync call, without a URL, is skipped.
func TestFinalizeCallRouted(t *testing.T) {
	finalizeRequest := strings.Replace(request, `"hooks":{`, `"hooks":{"finalize":{"webhook":{"url":"http://10.0.0.1:8080/finalize"}},`, 1)
	finalizeRequest = strings.Replace(finalizeRequest, `"finalizing":false`, `"finalizing":true`, 1)
	const finalized = `{"status":{"greeting":"Bye"},"children":[],"finalized":true}`
	h := newHook(t, answering(finalized))
	finalize := hookrecord.Call{Hook: "finalize", Request: json.RawMessage(finalizeRequest), Code: 200, Response: json.RawMessage(finalized)}
	dir := writeSet(t, syncCall(recordedAnswer), finalize)
	r := run(t, dir, Options{HookURLFor: map[string]string{"finalize": h.URL}})
	if len(r.Results) != 2 || r.Results[0].Status != Skipped || r.Results[1].Status != Same {
		t.Fatalf("results = %+v; want the sync call skipped, the finalize call the same", r.Results)
	}
	if res := r.Results[1]; res.Hook != "finalize" || res.File != "0002-finalize.json" || res.URL != h.URL+"/finalize" {
		t.Errorf("finalize result = %+v", res)
	}
	if len(h.paths) != 1 || h.paths[0] != "/finalize" || !strings.Contains(h.bodies[0], `"finalizing":true`) {
		t.Errorf("the hook was asked %v with %v", h.paths, h.bodies)
	}
	// A changed finalize answer is a difference like any other.
	h2 := newHook(t, answering(`{"status":{"greeting":"Bye"},"children":[],"finalized":false}`))
	r = run(t, dir, Options{HookURL: "http://127.0.0.1:1", HookURLFor: map[string]string{"finalize": h2.URL}})
	if res := r.Results[1]; res.Status != Differs || changeLines(res) != "~ .finalized: true -> false" {
		t.Errorf("finalize result = %+v", res)
	}
}

// TestLargeIntegersCompareExactly: an answer whose integer differs from
// the recorded one beyond a float64's precision differs.
func TestLargeIntegersCompareExactly(t *testing.T) {
	h := newHook(t, answering(`{"status":{"id":9007199254740992},"children":[]}`))
	dir := writeSet(t, syncCall(`{"status":{"id":9007199254740993},"children":[]}`))
	res := only(t, run(t, dir, Options{HookURL: h.URL}))
	if res.Status != Differs || changeLines(res) != "~ .status.id: 9007199254740993 -> 9007199254740992" {
		t.Errorf("result = %+v (%s)", res, changeLines(res))
	}
}

// TestRedactedWebhookURL: a recorded webhook url whose credentials were
// redacted (as metactl records them) still gives replay its path.
func TestRedactedWebhookURL(t *testing.T) {
	h := newHook(t, answering(recordedAnswer))
	redacted := strings.Replace(request, `"http://10.0.0.1:8080/sync"`, `"http://<redacted>@10.0.0.1:8080/hooks/sync?token=<redacted>"`, 1)
	dir := writeSet(t, hookrecord.Call{Hook: "sync", Request: json.RawMessage(redacted), Code: 200, Response: json.RawMessage(recordedAnswer)})
	res := only(t, run(t, dir, Options{HookURL: h.URL}))
	if res.Status != Same || len(h.paths) != 1 || h.paths[0] != "/hooks/sync" {
		t.Errorf("result = %+v, paths %v; want the same answer at /hooks/sync", res, h.paths)
	}
}
