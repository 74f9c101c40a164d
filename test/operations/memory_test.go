package operations

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// memoryLimit is the memory limit of the shipped Deployment
// (manifests/deploy/deployment.yaml), which also sets GOMEMLIMIT to it.
const memoryLimit = 256 << 20

// maxAnswer is the default largest hook answer (--max-hook-response-bytes).
const maxAnswer = 16 << 20

// bigAnswer is an answer of nearly maxAnswer bytes: thousands of Secrets
// of 24 keys each (fewer than v1alpha1.MaxAnswerObjects), which metactl decodes whole before it finds the answer
// wrong (its status is not an object), so that the sync fails, to be
// retried, without writing anything.
func bigAnswer() []byte {
	var b strings.Builder
	b.WriteString(`{"status":"not an object","children":[`)
	value := strings.Repeat("v", 60)
	for i := 0; ; i++ {
		var obj strings.Builder
		if i > 0 {
			obj.WriteString(",")
		}
		fmt.Fprintf(&obj, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"big-%05d","labels":{"app":"memory-test"}},"stringData":{`, i)
		for k := range 24 {
			if k > 0 {
				obj.WriteString(",")
			}
			fmt.Fprintf(&obj, `"key-%02d":"%s"`, k, value)
		}
		obj.WriteString("}}")
		if b.Len()+obj.Len()+2 > maxAnswer {
			break
		}
		b.WriteString(obj.String())
	}
	b.WriteString("]}")
	if n := strings.Count(b.String(), `"kind":"Secret"`); n > 10000 {
		panic(fmt.Sprintf("bigAnswer has %d children, more than one answer may ask for", n))
	}
	return []byte(b.String())
}

// bigHook serves body to every call, with a Content-Length or chunked,
// and counts the calls in flight (their peak) and the bodies read whole.
type bigHook struct {
	inFlight, peak, served atomic.Int64
}

// server starts the hook: over plain http, or with useTLS over HTTPS
// offering HTTP/2, whose CA bundle (PEM) it returns.
func (h *bigHook) server(t *testing.T, body []byte, chunked, useTLS bool) (*httptest.Server, string) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
		}
		w.Header().Set("Content-Type", "application/json")
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		for i := 0; i < len(body); i += 1 << 20 {
			if _, err := w.Write(body[i:min(i+1<<20, len(body))]); err != nil {
				return
			}
			if chunked {
				w.(http.Flusher).Flush()
			}
		}
		h.served.Add(1)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // calls given up mid-answer are expected
	t.Cleanup(s.Close)
	if !useTLS {
		s.Start()
		return s, ""
	}
	s.EnableHTTP2 = true
	s.StartTLS()
	return s, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

// createControllerWithCA is createController for a hook called over
// HTTPS, trusting caBundle.
func createControllerWithCA(t *testing.T, name, url, caBundle, children string) {
	t.Helper()
	if caBundle == "" {
		createController(t, name, url, children)
		return
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"parent": name}}},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": children}},
			"generateSelector": true,
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": url,
				"caBundle": map[string]any{"inline": caBundle}}}},
		},
	}}
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(context.Background(), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// rss returns the resident set of process pid now and at its peak.
func rss(pid int) (now, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", line, err)
		}
		if k == "VmRSS" {
			now = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return now, peak, nil
}

// TestOneHookCannotExhaustMemory runs `metactl run` with the shipped
// Deployment's settings (default flags, GOMEMLIMIT at its 256 MiB memory
// limit) and two controllers whose hooks answer nearly 16 MiB (the
// largest answer accepted) to every call, one with a Content-Length and
// one chunked, for 256 parents each (default --workers): every worker of
// both has a hook call in flight, and each answer fails after it is
// decoded, so that they are called again and again. metactl's peak
// resident set stays under the memory limit, while a third controller
// with a small hook creates the children of its new parents. It runs with
// the big hooks over plain http, and over HTTPS with HTTP/2 (the only way
// a hook with credentials is called), whose transport could buffer
// answers ahead of the budget.
func TestOneHookCannotExhaustMemory(t *testing.T) {
	body := bigAnswer()
	t.Run("http", func(t *testing.T) { testOneHookCannotExhaustMemory(t, body, false, 32) })
	t.Run("https-http2", func(t *testing.T) { testOneHookCannotExhaustMemory(t, body, true, 32) })
	// Answers of about 1 MiB that decode into about 50 MiB each: the
	// response budget would let some 24 of them be decoded at once; the
	// decoded budget (64 MiB, estimated before decoding) lets one. Such an
	// answer is sent quickly: fewer calls are in flight at the hooks at
	// once than metactl makes.
	t.Run("tiny-objects", func(t *testing.T) { testOneHookCannotExhaustMemory(t, tinyObjectsAnswer(), false, 2) })
}

// tinyObjectsAnswer is an answer of about 1.1 MiB whose status holds
// 140,000 objects of one key, which decode into about 50 MiB (and which
// metactl estimates, before decoding, at about 55 MiB: under the default
// decoded budget of 64 MiB). Its one child is a ConfigMap, a resource the
// memory test's controllers do not declare: the answer is refused once
// decoded, and nothing is written.
func tinyObjectsAnswer() []byte {
	var b strings.Builder
	b.WriteString(`{"status":{"n":[`)
	for i := range 140000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"a":0}`)
	}
	b.WriteString(`]},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"undeclared"}}]}`)
	return []byte(b.String())
}

// testOneHookCannotExhaustMemory runs the test with the big hooks
// answering body, and waits until at least minInFlight calls were in
// flight at once at each.
func testOneHookCannotExhaustMemory(t *testing.T, body []byte, useTLS bool, minInFlight int64) {
	ns := env.CreateNamespace(t)
	var hookA, hookB bigHook
	a, caA := hookA.server(t, body, false, useTLS)
	b, caB := hookB.server(t, body, true, useTLS)
	small, _ := hookServer(t, childAnswer)
	createControllerWithCA(t, "memory-big-a", a.URL, caA, "secrets")
	createControllerWithCA(t, "memory-big-b", b.URL, caB, "secrets")
	createController(t, "memory-small", small.URL, "secrets")

	metactl := testenv.BuildMetactl(t)
	// Open what the test executes, so that `go test` caches no result of
	// an older binary (a file this new makes the result uncacheable).
	if f, err := os.Open(metactl); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	cmd := exec.Command(metactl, "run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", "", "--health-addr", "", "--max-retry-delay", "1s")
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+strconv.Itoa(memoryLimit))
	p := testenv.StartCommand(t, cmd)
	pid := cmd.Process.Pid

	// Every wait below fails the test at once when metactl is over the
	// limit or gone. VmHWM is the peak resident set.
	healthy := func() error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("metactl exited: %v", err)
		}
		_, peak, err := rss(pid)
		if err != nil {
			return err
		}
		if peak >= memoryLimit {
			return fmt.Errorf("metactl's peak RSS is %d MiB, over the Deployment's memory limit of %d MiB (calls in flight at the big hooks peaked at %d and %d)",
				peak>>20, memoryLimit>>20, hookA.peak.Load(), hookB.peak.Load())
		}
		return nil
	}

	createParents := func(controller string, n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": fmt.Sprintf("%s-%03d", controller, i), "namespace": ns, "labels": map[string]any{"parent": controller}}}}
				if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	createParents("memory-big-a", 256)
	createParents("memory-big-b", 256)
	// Far more calls are in flight than the default budget (32 MiB)
	// holds answers of 16 MiB, for both controllers, and their answers
	// are read whole, again and again.
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%d calls in flight at once and 10 answers read whole at each big hook", minInFlight), func(context.Context) (bool, error) {
		mustBeHealthy(t, healthy)
		return hookA.peak.Load() >= minInFlight && hookB.peak.Load() >= minInFlight && hookA.served.Load() >= 10 && hookB.served.Load() >= 10, nil
	})

	// Meanwhile, the small controller works.
	createParents("memory-small", 10)
	start := time.Now()
	testenv.Eventually(t, 30*time.Second, "the small controller's 10 children", func(ctx context.Context) (bool, error) {
		mustBeHealthy(t, healthy)
		for i := range 10 {
			if _, err := env.Dynamic.Resource(secretsGVR).Namespace(ns).Get(ctx, fmt.Sprintf("memory-small-%03d-child", i), metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("the small controller converged in %v while the big ones churned", time.Since(start).Round(time.Millisecond))

	// The big ones kept churning meanwhile.
	servedA, servedB := hookA.served.Load(), hookB.served.Load()
	testenv.Eventually(t, 30*time.Second, "5 more big answers read whole at each hook", func(context.Context) (bool, error) {
		mustBeHealthy(t, healthy)
		return hookA.served.Load() >= servedA+5 && hookB.served.Load() >= servedB+5, nil
	})
	mustBeHealthy(t, healthy)
	_, peak, _ := rss(pid)
	t.Logf("metactl: peak RSS %d MiB; calls in flight at the big hooks peaked at %d and %d; big answers read whole: %d and %d",
		peak>>20, hookA.peak.Load(), hookB.peak.Load(), hookA.served.Load(), hookB.served.Load())
}

// mustBeHealthy fails the test at once when healthy reports a problem.
func mustBeHealthy(t *testing.T, healthy func() error) {
	t.Helper()
	if err := healthy(); err != nil {
		t.Fatal(err)
	}
}
