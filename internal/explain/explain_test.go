package explain_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/trigger"
)

var (
	now     = time.Date(2026, 11, 26, 15, 4, 0, 0, time.UTC)
	request = explain.Request{Group: "example.metactl.io", Version: "v1", Resource: "helloworlds", Namespace: "default", Name: "your-name"}
)

// failing is the answer for a parent whose hook fails.
func failing() *explain.Answer {
	return &explain.Answer{
		Object: request, Process: explain.Process{Name: "metactl-0", Leading: true}, Watched: true, InCache: true,
		Controllers: []explain.Controller{{
			Kind: "CompositeController", Name: "hello-world", Role: explain.RoleParent,
			State: explain.NewState([]*history.Sync{{Outcome: history.Outcome{Result: "error", Reason: "HookFailed",
				Error: "sync hook: 500 Internal Server Error", Attempt: 4, NextAttempt: now.Add(12 * time.Second)}}}, "", 0, time.Time{}, time.Time{}),
			Syncs: []*history.Sync{{
				Start: now.Add(-time.Second), Duration: 15 * time.Millisecond,
				Triggers: []trigger.Trigger{{Cause: trigger.CauseRetry}, {Cause: trigger.CauseObject, Object: "helloworlds/default/your-name", Generation: 2}},
				Calls:    []history.Call{{Hook: "sync", Duration: 9 * time.Millisecond, Result: "500", Error: "500 Internal Server Error"}},
				Outcome:  history.Outcome{Result: "error", Reason: "HookFailed", Error: "sync hook: 500 Internal Server Error", Attempt: 4, NextAttempt: now.Add(12 * time.Second)},
			}},
			Dependents: []explain.Dependent{{Resource: "configmaps", Namespace: "default", Name: "your-name-greeting", State: explain.DependentPresent}},
		}},
	}
}

// TestPrint: the human output names the controller, the state line with
// reason, error, attempt and next attempt, each sync with its triggers
// and hook calls, and the children; a healthy parent reads Synced.
func TestPrint(t *testing.T) {
	var b strings.Builder
	if err := explain.Print(&b, failing(), now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Object:       helloworlds.example.metactl.io default/your-name",
		"Answered by:  metactl metactl-0 (leader)",
		"Controller:   CompositeController hello-world (parent)",
		"State:        Failing: HookFailed sync hook: 500 Internal Server Error, attempt 4, next attempt in 12s (at 2026-11-26T15:04:12Z)",
		"retry, object helloworlds/default/your-name (generation 2)",
		"    hook sync: 500 in 9ms\n", // its error is the sync's, in the row above
		"configmaps  default/your-name-greeting  present",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	healthy := failing()
	healthy.Controllers[0].State = explain.NewState([]*history.Sync{{Outcome: history.Outcome{Result: "success"}}}, "", 0, time.Time{}, time.Time{})
	b.Reset()
	_ = explain.Print(&b, healthy, now)
	if !strings.Contains(b.String(), "State:        Synced\n") {
		t.Errorf("healthy output lacks the Synced state line:\n%s", b.String())
	}

	rolling := failing()
	rolling.Controllers[0].Dependents = []explain.Dependent{
		{Resource: "pods", Namespace: "default", Name: "web-0", State: explain.DependentPresent, Revision: "things.example-abc", Latest: true},
		{Resource: "pods", Namespace: "default", Name: "web-1", State: explain.DependentDeleting, Revision: "things.example-old"},
	}
	rolling.Controllers[0].Rollout = &explain.Rollout{Status: "False", Reason: "RolloutWaiting", Message: "pods web-0 is not ready"}
	b.Reset()
	_ = explain.Print(&b, rolling, now)
	for _, want := range []string{"Rollout:      Updated=False RolloutWaiting: pods web-0 is not ready", "RESOURCE  NAME           STATE     REVISION",
		"pods      default/web-0  present   things.example-abc (latest)", "pods      default/web-1  deleting  things.example-old"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("rolling output lacks %q:\n%s", want, b.String())
		}
	}

	none := &explain.Answer{Object: request, Process: explain.Process{Name: "m", Leading: true}, Watched: true, InCache: true,
		NotSelected: []explain.NotSelected{{Kind: "CompositeController", Name: "hello-world", Selector: "spec.parentResource.labelSelector team=a"}}}
	b.Reset()
	_ = explain.Print(&b, none, now)
	for _, want := range []string{"none: no controller selects it", "CompositeController hello-world syncs this resource but does not select it: spec.parentResource.labelSelector team=a"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPrintEscapesControlCharacters: text a hook controls (an error, a
// condition message) reaches the terminal with its control characters
// escaped: no escape sequence, carriage return or newline of its own.
func TestPrintEscapesControlCharacters(t *testing.T) {
	a := failing()
	c := &a.Controllers[0]
	hostile := "boom\x1b[2J\rfake line\nState: Synced\xff"
	c.State.Error = hostile
	c.Syncs[0].Outcome.Error = hostile
	c.Syncs[0].Calls[0].Error = "call " + hostile
	c.Syncs[0].Writes = []history.Write{{Verb: "patch", Target: "status", Object: "helloworlds/default/your-name", Error: hostile}}
	c.Rollout = &explain.Rollout{Status: "False", Reason: "RolloutWaiting", Message: "pod \x07 not ready\ttoo"}
	var b strings.Builder
	if err := explain.Print(&b, a, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b", "\r", "\x07", "\xff", "\nState: Synced", "\ttoo"} {
		if strings.Contains(out, bad) {
			t.Errorf("output holds %q unescaped:\n%s", bad, out)
		}
	}
	for _, want := range []string{`boom\x1b[2J\rfake line\nState: Synced\xff`, `pod \a not ready\ttoo`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks the escaped %q:\n%s", want, out)
		}
	}
}

// TestNewState: without records, the failing set and the queue's failures
// say Failing; else Unknown.
func TestNewState(t *testing.T) {
	if s := explain.NewState(nil, "boom", 2, time.Time{}, time.Time{}); s.Phase != explain.PhaseFailing || s.Error != "boom" || s.Attempt != 2 {
		t.Errorf("failing without records: %+v", s)
	}
	if s := explain.NewState(nil, "", 0, time.Time{}, time.Time{}); s.Phase != explain.PhaseUnknown {
		t.Errorf("not failing, no records: %+v", s)
	}
	if s := explain.NewState([]*history.Sync{{Outcome: history.Outcome{Result: "waiting", Reason: "Waiting"}}}, "", 0, time.Time{}, time.Time{}); s.Phase != explain.PhaseWaiting {
		t.Errorf("waiting: %+v", s)
	}
	if s := explain.NewState(nil, "", 0, time.Time{}, now); s.Phase != explain.PhaseQueued || !s.QueuedSince.Equal(now) {
		t.Errorf("queued, no records: %+v", s)
	}
}

// TestPrintSaysWhatIsKept: the syncs' header says what the record keeps.
func TestPrintSaysWhatIsKept(t *testing.T) {
	a := failing()
	a.Controllers[0].Kept = &explain.Kept{SyncsPerObject: 20, BytesPerObject: 32 << 10, Bytes: 4 << 20}
	var b strings.Builder
	if err := explain.Print(&b, a, now); err != nil {
		t.Fatal(err)
	}
	want := "Record kept:  the last 20 syncs of each object within 32 KiB, and its last failure; 4 MiB for all (--history-max-bytes)\nRecent syncs (newest first):"
	if !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}

// TestPrintQueued: a parent waiting in the queue for its first sync reads
// Queued, with how long it has waited and why.
func TestPrintQueued(t *testing.T) {
	a := failing()
	a.Controllers[0].State = explain.NewState(nil, "", 0, time.Time{}, now.Add(-38*time.Second))
	a.Controllers[0].Syncs = nil
	var b strings.Builder
	if err := explain.Print(&b, a, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"State:", "Queued: no sync recorded yet", "queued for 38s: waiting for a worker"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

type source struct {
	mu   sync.Mutex
	got  []explain.Request
	from func(explain.Request) *explain.Answer
}

func (s *source) Explain(_ context.Context, req explain.Request) (*explain.Answer, error) {
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	return s.from(req), nil
}

// TestHandlerAndFetch: Fetch's request reaches the Source whole, and its
// answer comes back whole; a request without a name is refused.
func TestHandlerAndFetch(t *testing.T) {
	src := &source{from: func(explain.Request) *explain.Answer { return failing() }}
	mux := http.NewServeMux()
	mux.Handle(explain.Path, explain.Handler(src))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	a, err := explain.Fetch(context.Background(), srv.Client(), srv.URL, request)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.got) != 1 || src.got[0] != request {
		t.Errorf("the source was asked %+v, want %+v", src.got, request)
	}
	want, _ := json.Marshal(failing())
	if got, _ := json.Marshal(a); string(got) != string(want) {
		t.Errorf("answer\n%s\nwant\n%s", got, want)
	}

	if _, err := explain.Fetch(context.Background(), srv.Client(), srv.URL, explain.Request{Resource: "helloworlds"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a request without a name: %v, want 400", err)
	}
	resp, err := http.Post(srv.URL+explain.Path+"?"+request.Query().Encode(), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", resp.Status)
	}
	if _, err := explain.Fetch(context.Background(), srv.Client(), "http://127.0.0.1:1", request); err == nil || !strings.Contains(err.Error(), "reaching metactl at http://127.0.0.1:1") {
		t.Errorf("nothing listening: %v", err)
	}
}

// fakeAPIServer serves a Pod list and the Pod proxy's explain path, as
// the API server does (envtest runs no kubelet and proxies to no Pod):
// each proxied request is recorded, and answered by answers by Pod name.
type fakeAPIServer struct {
	*httptest.Server
	mu      sync.Mutex
	proxied []string
}

func newFakeAPIServer(t *testing.T, items []corev1.Pod, answers map[string]*explain.Answer) *fakeAPIServer {
	f := &fakeAPIServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		const pods = "/api/v1/namespaces/metactl-system/pods"
		switch {
		case r.URL.Path == pods:
			if got := r.URL.Query().Get("labelSelector"); got != explain.PodSelector {
				http.Error(w, "selector "+got, http.StatusBadRequest)
				return
			}
			_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: items})
		case strings.HasPrefix(r.URL.Path, pods+"/") && strings.HasSuffix(r.URL.Path, "/proxy"+explain.Path):
			f.mu.Lock()
			f.proxied = append(f.proxied, r.URL.Path+"?"+r.URL.RawQuery)
			f.mu.Unlock()
			name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, pods+"/"), ":")
			a := answers[name]
			if a == nil {
				http.Error(w, "no such pod", http.StatusServiceUnavailable)
				return
			}
			_ = json.NewEncoder(w).Encode(a)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func pod(name string, ready bool) corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "metactl-system"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
}

func clientset(t *testing.T, url string) corev1client.CoreV1Interface {
	cs, err := corev1client.NewForConfig(&rest.Config{Host: url})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestFetchThroughPods: each Running Pod is asked at
// /api/v1/namespaces/NS/pods/NAME:PORT/proxy/debug/explain with the
// request's query, the Ready ones first, and the leader's answer is
// returned, even from a Pod that is not Ready; a Pod not Running is not
// asked; with only standbys the error says none leads; with two leaders
// it names them; with no Running Pod, it says what to check.
func TestFetchThroughPods(t *testing.T) {
	leader, standby := failing(), failing()
	leader.Process.Name = "metactl-b"
	standby.Process = explain.Process{Name: "metactl-a"}
	pending := pod("metactl-d", false)
	pending.Status.Phase = corev1.PodPending
	f := newFakeAPIServer(t, []corev1.Pod{pod("metactl-b", false), pod("metactl-a", true), pending},
		map[string]*explain.Answer{"metactl-a": standby, "metactl-b": leader, "metactl-d": leader})
	a, err := explain.FetchThroughPods(context.Background(), clientset(t, f.URL), "metactl-system", explain.PodSelector, "9999", request)
	if err != nil {
		t.Fatal(err)
	}
	if a.Process.Name != "metactl-b" {
		t.Errorf("answer from %s, want the leader metactl-b, not Ready", a.Process.Name)
	}
	wantQuery := request.Query().Encode()
	for _, p := range f.proxied {
		if strings.Contains(p, "metactl-d") {
			t.Errorf("asked the Pod that is not Running: %s", p)
		}
	}
	if len(f.proxied) != 2 || f.proxied[0] != "/api/v1/namespaces/metactl-system/pods/metactl-a:9999/proxy/debug/explain?"+wantQuery {
		t.Errorf("proxied %q, want the Ready metactl-a first (/api/v1/namespaces/metactl-system/pods/metactl-a:9999/proxy/debug/explain?%s), then metactl-b", f.proxied, wantQuery)
	}

	other := failing()
	other.Process.Name = "metactl-c"
	f = newFakeAPIServer(t, []corev1.Pod{pod("metactl-b", true), pod("metactl-c", true)}, map[string]*explain.Answer{"metactl-b": leader, "metactl-c": other})
	if _, err := explain.FetchThroughPods(context.Background(), clientset(t, f.URL), "metactl-system", explain.PodSelector, "9999", request); !errors.Is(err, explain.ErrSeveralLeaders) ||
		!strings.Contains(err.Error(), "metactl-b, metactl-c") {
		t.Errorf("two leaders: %v, want ErrSeveralLeaders naming both", err)
	}
	f = newFakeAPIServer(t, []corev1.Pod{pod("metactl-a", true)}, map[string]*explain.Answer{"metactl-a": standby})
	if _, err := explain.FetchThroughPods(context.Background(), clientset(t, f.URL), "metactl-system", explain.PodSelector, "9999", request); !errors.Is(err, explain.ErrNotLeading) {
		t.Errorf("only a standby: %v, want ErrNotLeading", err)
	}
	f = newFakeAPIServer(t, []corev1.Pod{pending}, nil)
	if _, err := explain.FetchThroughPods(context.Background(), clientset(t, f.URL), "metactl-system", explain.PodSelector, "9999", request); err == nil || !strings.Contains(err.Error(), "no Running metactl Pod in namespace metactl-system") {
		t.Errorf("no Running Pod: %v", err)
	}
}

// TestRecordedEndpoint: the endpoint metactl dev writes into a kubeconfig
// is read back from it through client-go's loading, as explain does.
func TestRecordedEndpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "c"}
	cfg.CurrentContext = "dev"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := explain.RecordEndpoint(path, "http://127.0.0.1:4242"); err != nil {
		t.Fatal(err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	raw, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).RawConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := explain.RecordedEndpoint(raw, ""); got != "http://127.0.0.1:4242" {
		t.Errorf("recorded endpoint %q", got)
	}
	if got := explain.RecordedEndpoint(raw, "other"); got != "" {
		t.Errorf("another context's endpoint %q, want none", got)
	}
}

// TestAnswerOverTheLimit: an answer longer than the limit is an error
// saying so, directly and through the Pod proxy, not a body cut short;
// an answer other than 200 through the proxy keeps its code and body.
func TestAnswerOverTheLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/big"):
			_, _ = io.WriteString(w, strings.Repeat("x", 101))
		case strings.HasSuffix(r.URL.Path, "/fits"):
			_, _ = io.WriteString(w, strings.Repeat("x", 100))
		default:
			http.Error(w, "record: not here", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	if _, err := explain.GetEndpoint(context.Background(), srv.Client(), srv.URL, "/big", nil, 100); err == nil || !strings.Contains(err.Error(), "exceeds 100 bytes") {
		t.Errorf("GetEndpoint of 101 bytes, limit 100: %v", err)
	}
	if b, err := explain.GetEndpoint(context.Background(), srv.Client(), srv.URL, "/fits", nil, 100); err != nil || len(b) != 100 {
		t.Errorf("GetEndpoint of 100 bytes, limit 100: %d bytes, %v", len(b), err)
	}
	cs := clientset(t, srv.URL)
	if _, _, err := explain.GetThroughPod(context.Background(), cs, "ns", "p", "9999", "/big", nil, 100); err == nil || !strings.Contains(err.Error(), "exceeds 100 bytes") {
		t.Errorf("GetThroughPod of 101 bytes, limit 100: %v", err)
	}
	if b, code, err := explain.GetThroughPod(context.Background(), cs, "ns", "p", "9999", "/fits", nil, 100); err != nil || code != 200 || len(b) != 100 {
		t.Errorf("GetThroughPod of 100 bytes: %d bytes, %d, %v", len(b), code, err)
	}
	b, code, err := explain.GetThroughPod(context.Background(), cs, "ns", "p", "9999", "/missing", nil, 100)
	if _, ok := err.(apierrors.APIStatus); !ok || code != 404 || strings.TrimSpace(string(b)) != "record: not here" {
		t.Errorf("GetThroughPod of a 404: %q, %d, %v", b, code, err)
	}
}
