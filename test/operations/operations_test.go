package operations

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

var (
	env           *testenv.Environment
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{ExtraCRDPaths: []string{"../../pkg/composite/testdata/crds"}}, &env)
}

var thingsGVR = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "things"}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// metactlRun starts `metactl run` with its endpoints on free ports and
// returns the process and its metrics and health base URLs.
func metactlRun(t *testing.T, args ...string) (p *testenv.Process, metrics, health string) {
	mp, hp := testenv.FreePort(t), testenv.FreePort(t)
	metrics, health = fmt.Sprintf("http://127.0.0.1:%d", mp), fmt.Sprintf("http://127.0.0.1:%d", hp)
	args = append([]string{"run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath, "--workers", "4",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp), "--health-addr", fmt.Sprintf("127.0.0.1:%d", hp)}, args...)
	return testenv.StartProcess(t, testenv.BuildMetactl(t), args...), metrics, health
}

// scrape returns the samples of base's /metrics, by name plus labels, or
// an error when they could not be read (a metactl that is not serving is
// not one with empty metrics).
func scrape(base string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", base, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scraping %s: %w", base, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("scraping %s: no samples", base)
	}
	return out, nil
}

// mustScrape is scrape for a metactl that must be serving: the test fails
// when it is not.
func mustScrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	samples, err := scrape(base)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

// metricIs returns a condition for Eventually: the sum of the metric's
// samples at base equals want; a failed scrape is the condition's error.
func metricIs(base, name string, want float64) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		samples, err := scrape(base)
		if err != nil {
			return false, err
		}
		return sum(samples, name) == want, nil
	}
}

// sum adds the samples of a metric (any labels) whose labels contain all
// of the given substrings.
func sum(samples map[string]float64, name string, labels ...string) float64 {
	total := 0.0
	for series, v := range samples {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(series, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

// hookServer answers every parent with answer(parent), and counts calls.
func hookServer(t *testing.T, answer func(parent *unstructured.Unstructured) map[string]any) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Parent *unstructured.Unstructured `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		_ = json.NewEncoder(w).Encode(answer(req.Parent))
	}))
	t.Cleanup(s.Close)
	return s, &calls
}

// childAnswer asks for one Secret <parent>-child.
func childAnswer(parent *unstructured.Unstructured) map[string]any {
	return map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": parent.GetName() + "-child"}, "stringData": map[string]any{"from": parent.GetName()}}}}
}

// createController creates a CompositeController over ConfigMaps labelled
// parent=<name>, with children of the given resource and generated
// selectors.
func createController(t *testing.T, name, url string, children string) {
	t.Helper()
	createControllerOver(t, name, url, configMapsGVR, children)
}

func createControllerOver(t *testing.T, name, url string, parents schema.GroupVersionResource, children string) {
	t.Helper()
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": parents.GroupVersion().String(), "resource": parents.Resource,
				"labelSelector": map[string]any{"matchLabels": map[string]any{"parent": name}}},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": children}},
			"generateSelector": true,
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": url}}},
		},
	}}
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx(t), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func createParent(t *testing.T, ns, name, controller string) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"parent": controller}}}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitChild(t *testing.T, ns, name string, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "child "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
}

// TestLeaderElection runs two replicas: only the leader calls hooks; when
// the leader is killed, the other takes over within the lease duration and
// finishes the work, with exactly one child per parent.
func TestLeaderElection(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook, calls := hookServer(t, childAnswer)
	createController(t, "elected", hook.URL, "secrets")
	leArgs := []string{"--leader-elect", "--leader-elect-namespace", ns, "--leader-elect-lease-duration", "4s",
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}
	a, aMetrics, _ := metactlRun(t, leArgs...)
	b, bMetrics, _ := metactlRun(t, leArgs...)

	var leader, standby *testenv.Process
	var leaderMetrics, standbyMetrics string
	testenv.Eventually(t, 30*time.Second, "a leader, and a standby serving its metrics", func(context.Context) (bool, error) {
		aSamples, err := scrape(aMetrics)
		if err != nil {
			return false, err
		}
		bSamples, err := scrape(bMetrics)
		if err != nil {
			return false, err
		}
		switch {
		case sum(aSamples, "metactl_leader") == 1 && sum(bSamples, "metactl_leader") == 0:
			leader, leaderMetrics, standby, standbyMetrics = a, aMetrics, b, bMetrics
		case sum(bSamples, "metactl_leader") == 1 && sum(aSamples, "metactl_leader") == 0:
			leader, leaderMetrics, standby, standbyMetrics = b, bMetrics, a, aMetrics
		}
		return leader != nil, nil
	})
	for i := range 5 {
		createParent(t, ns, fmt.Sprintf("p%d", i), "elected")
	}
	for i := range 5 {
		waitChild(t, ns, fmt.Sprintf("p%d-child", i), 30*time.Second)
	}
	if n := sum(mustScrape(t, standbyMetrics), "metactl_hook_requests_total"); n != 0 {
		t.Errorf("the standby called hooks %v times", n)
	}
	if n := sum(mustScrape(t, leaderMetrics), "metactl_hook_requests_total"); n == 0 || calls.Load() == 0 {
		t.Error("the leader called no hook")
	}

	if err := leader.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for i := 5; i < 10; i++ {
		createParent(t, ns, fmt.Sprintf("p%d", i), "elected")
	}
	// The standby takes the Lease once it has seen no renewal for the lease
	// duration (4s): it notices the last renewal at most one retry period
	// late and tries again every retry period, each up to 1.1s (500ms with
	// client-go's jitter of 1.2); allow 1.5s more for a loaded machine.
	takeover := 4*time.Second + 2*1100*time.Millisecond + 1500*time.Millisecond
	testenv.Eventually(t, takeover-time.Since(killed), "the standby to lead within the lease duration", metricIs(standbyMetrics, "metactl_leader", 1))
	t.Logf("took over %v after the kill (lease duration 4s)", time.Since(killed).Round(100*time.Millisecond))
	for i := range 10 {
		waitChild(t, ns, fmt.Sprintf("p%d-child", i), 30*time.Second)
	}
	list, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	children := map[string]int{}
	for _, cm := range list.Items {
		if ref := metav1.GetControllerOf(&cm); ref != nil {
			children[ref.Name]++
		}
	}
	for i := range 10 {
		if n := children[fmt.Sprintf("p%d", i)]; n != 1 {
			t.Errorf("p%d has %d children, want 1", i, n)
		}
	}
	if exited, _ := standby.Exited(); exited {
		t.Error("the new leader exited")
	}
}

// TestHealthAndMetrics checks readiness before and after the caches sync,
// and that the documented series are served and move.
func TestHealthAndMetrics(t *testing.T) {
	// An API server that accepts connections and never answers: the caches
	// never sync.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	stuckConfig := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://%s'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n", ln.Addr())
	if err := os.WriteFile(stuckConfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	hp := testenv.FreePort(t)
	stuck := testenv.StartProcess(t, testenv.BuildMetactl(t), "run", "--allow-loopback-hooks", "--kubeconfig", stuckConfig, "--metrics-addr", "",
		"--health-addr", fmt.Sprintf("127.0.0.1:%d", hp))
	_ = stuck
	health := fmt.Sprintf("http://127.0.0.1:%d", hp)
	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	testenv.Eventually(t, 30*time.Second, "healthz 200 while caches are not synced", func(context.Context) (bool, error) {
		return status(health+"/healthz") == 200, nil
	})
	if got := status(health + "/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("readyz before the caches synced = %d, want 503", got)
	}

	ns := env.CreateNamespace(t)
	hook, _ := hookServer(t, childAnswer)
	createController(t, "metered", hook.URL, "secrets")
	_, metrics, health2 := metactlRun(t)
	testenv.Eventually(t, 30*time.Second, "readyz 200", func(context.Context) (bool, error) { return status(health2+"/readyz") == 200, nil })
	createParent(t, ns, "p1", "metered")
	waitChild(t, ns, "p1-child", 30*time.Second)
	var before map[string]float64
	testenv.Eventually(t, 30*time.Second, "the documented series", func(context.Context) (bool, error) {
		var err error
		if before, err = scrape(metrics); err != nil {
			return false, err
		}
		for _, name := range []string{
			"metactl_hook_requests_total", "metactl_hook_duration_seconds_count", "metactl_syncs_total",
			"metactl_sync_duration_seconds_count", "metactl_workqueue_depth", "metactl_workqueue_adds_total",
			"metactl_workqueue_retries_total", "metactl_api_requests_total", "metactl_informer_objects",
			"metactl_leader", "metactl_object_writes_total", "metactl_controller_ready",
		} {
			found := false
			for series := range before {
				found = found || series == name || strings.HasPrefix(series, name+"{")
			}
			if !found {
				return false, fmt.Errorf("series %s missing", name)
			}
		}
		return true, nil
	})
	if sum(before, "metactl_hook_requests_total", `controller="metered"`, `hook="sync"`, `code="200"`) < 1 {
		t.Error("no hook request counted")
	}
	createParent(t, ns, "p2", "metered")
	waitChild(t, ns, "p2-child", 30*time.Second)
	testenv.Eventually(t, 30*time.Second, "counters moving", func(context.Context) (bool, error) {
		after, err := scrape(metrics)
		if err != nil {
			return false, err
		}
		return sum(after, "metactl_hook_requests_total", `controller="metered"`) > sum(before, "metactl_hook_requests_total", `controller="metered"`) &&
			sum(after, "metactl_object_writes_total", `controller="metered"`, `verb="create"`) > sum(before, "metactl_object_writes_total", `controller="metered"`, `verb="create"`) &&
			sum(after, "metactl_api_requests_total", `verb="POST"`) > sum(before, "metactl_api_requests_total", `verb="POST"`), nil
	})
	if sum(before, "metactl_informer_objects", `resource="/v1, Resource=configmaps"`) < 1 {
		t.Errorf("metactl_informer_objects does not count ConfigMaps: %v", before)
	}
}

// TestSecretDataIsNeverLogged runs metactl at -v=6, where hook bodies are
// logged, with a hook that returns a Secret child: neither the secret value
// nor its base64 form appears in the logs or the Events.
func TestSecretDataIsNeverLogged(t *testing.T) {
	ns := env.CreateNamespace(t)
	const secret = "TOPSECRET-metactl-4f1c"
	hook, _ := hookServer(t, func(parent *unstructured.Unstructured) map[string]any {
		return map[string]any{"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": parent.GetName() + "-secret"}, "stringData": map[string]any{"password": secret}}}}
	})
	createController(t, "secretive", hook.URL, "secrets")
	p, _, _ := metactlRun(t, "-v=6")
	createParent(t, ns, "p1", "secretive")
	testenv.Eventually(t, 30*time.Second, "the Secret child", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx, "p1-secret", metav1.GetOptions{})
		return err == nil, nil
	})
	// Change the secret so that a diff (-v=5) and a second hook round trip
	// with the Secret observed (-v=6) are logged too.
	patch := []byte(`{"stringData":{"password":"other-` + secret + `"}}`)
	if _, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Patch(ctx(t), "p1-secret", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "hook bodies with the observed Secret in the log", func(context.Context) (bool, error) {
		return regexp.MustCompile(`Hook request.*Secret.v1.*p1-secret`).MatchString(p.Output()), nil
	})
	logs := p.Output()
	encoded := "VE9QU0VDUkVULW1ldGFjdGwtNGYxYw" // base64 of the secret, without padding
	for _, leak := range []string{secret, encoded} {
		if strings.Contains(logs, leak) {
			t.Errorf("the logs contain %q", leak)
		}
	}
	if !regexp.MustCompile(`password[\\"]*:[\\"]*<redacted>`).MatchString(logs) {
		t.Error("the logs show no redacted Secret: the test saw no Secret body at all")
	}
	events, err := env.Kube.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, secret) || strings.Contains(e.Message, encoded) {
			t.Errorf("Event %s leaks the secret: %s", e.Name, e.Message)
		}
	}
}

// TestJSONLogs checks --log-format json writes one JSON object per line.
func TestJSONLogs(t *testing.T) {
	p, _, health := metactlRun(t, "--log-format", "json", "-v=2")
	testenv.Eventually(t, 30*time.Second, "ready", func(context.Context) (bool, error) {
		resp, err := http.Get(health + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	})
	testenv.Eventually(t, 30*time.Second, "JSON log lines", func(context.Context) (bool, error) {
		return strings.Contains(p.Output(), "Watching CompositeControllers"), nil
	})
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(p.Output()), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if entry["msg"] == nil {
			t.Fatalf("a JSON line without msg: %q", line)
		}
		lines++
	}
	if lines < 2 {
		t.Errorf("only %d log lines", lines)
	}
}

// TestKilledDuringAWave kills metactl with SIGKILL three times while it
// creates the children of 500 parents, restarting it each time; at the end
// every parent has exactly its one child, owned by it, and its status.
func TestKilledDuringAWave(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook, _ := hookServer(t, func(parent *unstructured.Unstructured) map[string]any {
		answer := childAnswer(parent)
		answer["status"] = map[string]any{"child": parent.GetName() + "-child"}
		return answer
	})
	createControllerOver(t, "wave", hook.URL, thingsGVR, "secrets")
	const parents = 500
	created := make(chan error, 1)
	go func() {
		var err error
		for i := range parents {
			thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Thing",
				"metadata": map[string]any{"name": fmt.Sprintf("p%03d", i), "namespace": ns, "labels": map[string]any{"parent": "wave"}}}}
			if _, e := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(context.Background(), thing, metav1.CreateOptions{}); e != nil && err == nil {
				err = e
			}
		}
		created <- err
	}()
	childCount := func() int {
		list, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			return 0
		}
		return len(list.Items)
	}
	for kill := 1; kill <= 3; kill++ {
		p, _, _ := metactlRun(t)
		target := kill * parents / 5
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%d children before kill %d", target, kill), func(context.Context) (bool, error) {
			return childCount() >= target, nil
		})
		if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.Wait(t, 10*time.Second)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	metactlRun(t)
	testenv.Eventually(t, 2*time.Minute, "every parent's status", func(ctx context.Context) (bool, error) {
		list, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "parent=wave"})
		if err != nil {
			return false, err
		}
		done := 0
		for _, p := range list.Items {
			if v, _, _ := unstructured.NestedString(p.Object, "status", "child"); v == p.GetName()+"-child" {
				done++
			}
		}
		return done == parents, nil
	})
	t.Logf("every parent's status %v after the last restart", time.Since(restarted).Round(100*time.Millisecond))
	list, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]int{}
	for _, s := range list.Items {
		ref := metav1.GetControllerOf(&s)
		if ref == nil || s.GetName() != ref.Name+"-child" {
			t.Errorf("child %s is owned by %v", s.GetName(), ref)
			continue
		}
		owned[ref.Name]++
	}
	for i := range parents {
		if n := owned[fmt.Sprintf("p%03d", i)]; n != 1 {
			t.Errorf("p%03d has %d children, want 1", i, n)
		}
	}
	t.Logf("%d children for %d parents", len(list.Items), parents)
}

// flakyHook is a hook on a fixed loopback port that can go down (nothing
// listening), time out, answer 500 or answer invalid JSON, and recover. It
// records when each call arrived.
type flakyHook struct {
	addr   string
	mode   atomic.Value // "ok", "down", "timeout", "500", "json"
	mu     sync.Mutex
	ln     net.Listener
	server *http.Server
	times  []time.Time
}

func newFlakyHook(t *testing.T) *flakyHook {
	h := &flakyHook{addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}
	h.mode.Store("ok")
	h.listen(t)
	t.Cleanup(h.down)
	return h
}

// listen starts serving on the hook's address.
func (h *flakyHook) listen(t *testing.T) {
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	server := &http.Server{Handler: http.HandlerFunc(h.serve)}
	h.mu.Lock()
	h.ln, h.server = ln, server
	h.mu.Unlock()
	go func() { _ = server.Serve(ln) }()
}

// down closes the listener and every connection: connections are refused.
func (h *flakyHook) down() {
	h.mu.Lock()
	server := h.server
	h.mu.Unlock()
	_ = server.Close()
}

func (h *flakyHook) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.times = append(h.times, time.Now())
	h.mu.Unlock()
	var req struct {
		Parent *unstructured.Unstructured `json:"parent"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	switch h.mode.Load() {
	case "timeout":
		<-r.Context().Done()
	case "500":
		http.Error(w, "broken", 500)
	case "json":
		_, _ = w.Write([]byte(`{"children": [`))
	default:
		value, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "value")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": map[string]any{"value": value},
			"children": []any{map[string]any{"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": req.Parent.GetName() + "-child"}, "stringData": map[string]any{"value": value}}},
		})
	}
}

func (h *flakyHook) calls() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.times...)
}

// TestHookOutageAndRecovery breaks the hook in each way for a while: no
// child is changed or deleted meanwhile, retries back off, and after the
// hook recovers the parent converges within one backoff period.
func TestHookOutageAndRecovery(t *testing.T) {
	metactlRun(t)
	for _, mode := range []string{"down", "timeout", "500", "json"} {
		t.Run(mode, func(t *testing.T) {
			ns := env.CreateNamespace(t)
			h := newFlakyHook(t)
			name := "outage-" + mode
			createControllerOver(t, name, "http://"+h.addr+"/sync", thingsGVR, "secrets")
			cc := map[string]any{"spec": map[string]any{"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{"timeout": "500ms"}}}}}
			patch, _ := json.Marshal(cc)
			if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Patch(ctx(t), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Thing",
				"metadata": map[string]any{"name": "p1", "namespace": ns, "labels": map[string]any{"parent": name}},
				"spec":     map[string]any{"value": "before"}}}
			if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), thing, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var child *unstructured.Unstructured
			testenv.Eventually(t, 30*time.Second, "the child", func(ctx context.Context) (bool, error) {
				var err error
				child, err = env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx, "p1-child", metav1.GetOptions{})
				return err == nil, nil
			})

			// The outage.
			if mode == "down" {
				h.down()
			} else {
				h.mode.Store(mode)
			}
			outageStart := len(h.calls())
			began := time.Now()
			setValue := []byte(`{"spec":{"value":"after"}}`)
			if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(ctx(t), "p1", "application/merge-patch+json", setValue, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, 30*time.Second, "eight seconds of outage", func(context.Context) (bool, error) {
				return time.Since(began) > 8*time.Second, nil
			})
			during := h.calls()[outageStart:]
			now, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx(t), "p1-child", metav1.GetOptions{})
			if err != nil || now.GetResourceVersion() != child.GetResourceVersion() {
				t.Fatalf("the child changed or went away during the outage (err %v)", err)
			}
			p, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Get(ctx(t), "p1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, _, _ := unstructured.NestedString(p.Object, "status", "value"); v != "before" {
				t.Fatalf("the status changed to %q during the outage", v)
			}
			if mode != "down" {
				if len(during) < 3 || len(during) > 12 {
					t.Errorf("%d hook calls in 8s of outage, want a few, backing off", len(during))
				} else if first, last := during[1].Sub(during[0]), during[len(during)-1].Sub(during[len(during)-2]); last < 3*first {
					t.Errorf("retries did not back off: first gap %v, last gap %v", first, last)
				}
			}

			// Recovery: within one more backoff period. The delays double
			// from 250ms, so the next one is at most 250ms more than all the
			// earlier ones together, which fit in the outage so far; where
			// the calls were seen, it is also at most twice the last gap.
			// Allow 2s more for the sync itself on a loaded machine.
			h.mode.Store("ok")
			if mode == "down" {
				h.listen(t)
			}
			recovered := time.Now()
			backoff := recovered.Sub(began) + 250*time.Millisecond
			if len(during) >= 2 {
				backoff = min(backoff, 2*during[len(during)-1].Sub(during[len(during)-2]))
			}
			testenv.Eventually(t, backoff+2*time.Second, "convergence within one backoff period after recovery", func(ctx context.Context) (bool, error) {
				p, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Get(ctx, "p1", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				v, _, _ := unstructured.NestedString(p.Object, "status", "value")
				return v == "after", nil
			})
			t.Logf("%s: converged %v after recovery (next backoff at most %v)", mode, time.Since(recovered).Round(100*time.Millisecond), backoff.Round(100*time.Millisecond))
		})
	}
}

// tcpProxy forwards loopback connections to target; stop refuses and cuts
// every connection, as a stopped API server would, and start resumes on the
// same address.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func (p *tcpProxy) start(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestAPIServerOutage cuts metactl off from the API server in the middle of
// a wave (every connection closed, new ones refused) for eight seconds:
// metactl reconnects, re-lists and converges, and no child that existed
// before the outage was deleted or replaced.
func TestAPIServerOutage(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook, _ := hookServer(t, func(parent *unstructured.Unstructured) map[string]any {
		answer := childAnswer(parent)
		answer["status"] = map[string]any{"child": parent.GetName() + "-child"}
		return answer
	})
	createControllerOver(t, "outage", hook.URL, thingsGVR, "secrets")

	server, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &tcpProxy{addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), target: server.Host}
	proxy.start(t)
	t.Cleanup(proxy.stop)
	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	proxied := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(proxied, []byte(strings.ReplaceAll(string(kubeconfig), server.Host, proxy.addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.StartProcess(t, testenv.BuildMetactl(t), "run", "--allow-loopback-hooks", "--kubeconfig", proxied, "--metrics-addr", "", "--health-addr", "", "--workers", "8")

	create := func(from, to int) {
		for i := from; i < to; i++ {
			thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metactl.io/v1", "kind": "Thing",
				"metadata": map[string]any{"name": fmt.Sprintf("p%03d", i), "namespace": ns, "labels": map[string]any{"parent": "outage"}}}}
			if _, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).Create(ctx(t), thing, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	children := func() map[string]string {
		list, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range list.Items {
			out[s.GetName()] = string(s.GetUID())
		}
		return out
	}
	create(0, 100)
	testenv.Eventually(t, 60*time.Second, "the first children", func(context.Context) (bool, error) { return len(children()) >= 50, nil })

	proxy.stop()
	before := children()
	create(100, 200) // the wave goes on while metactl cannot see it
	cut := time.Now()
	testenv.Eventually(t, 30*time.Second, "eight seconds of outage", func(context.Context) (bool, error) {
		return time.Since(cut) >= 8*time.Second, nil
	})
	proxy.start(t)
	back := time.Now()

	testenv.Eventually(t, 2*time.Minute, "every parent's status", func(ctx context.Context) (bool, error) {
		list, err := env.Dynamic.Resource(thingsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, p := range list.Items {
			if v, _, _ := unstructured.NestedString(p.Object, "status", "child"); v == p.GetName()+"-child" {
				done++
			}
		}
		return done == 200, nil
	})
	t.Logf("every parent's status %v after the API server came back", time.Since(back).Round(100*time.Millisecond))
	after := children()
	t.Logf("%d children for 200 parents; %d existed before the outage", len(after), len(before))
	if len(after) != 200 {
		t.Errorf("%d children for 200 parents", len(after))
	}
	for name, uid := range before {
		if after[name] != uid {
			t.Errorf("%s existed before the outage and was deleted or replaced", name)
		}
	}
}
