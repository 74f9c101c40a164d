package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
)

// resyncAnnotation is the annotation `metactl resync` sets.
const resyncAnnotation = "metactl.io/resync-requested"

// switchHook is a sync hook for HelloWorld parents of one namespace: it
// answers 500 while failing is set, else a status that echoes the parent's
// resync annotation, and no children. It records when it first answered
// well.
type switchHook struct {
	*httptest.Server
	failing   atomic.Bool
	mu        sync.Mutex
	succeeded time.Time
}

func startSwitchHook(t *testing.T) *switchHook {
	h := &switchHook{}
	h.failing.Store(true)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if h.failing.Load() {
			http.Error(w, "hook down", http.StatusInternalServerError)
			return
		}
		h.mu.Lock()
		if h.succeeded.IsZero() {
			h.succeeded = time.Now()
		}
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status":   map[string]any{"resync": req.Parent.Metadata.Annotations[resyncAnnotation]},
			"children": []any{},
		})
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *switchHook) firstSuccess() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.succeeded
}

// startSwitchController runs `metactl run` with extra flags and a
// CompositeController of HelloWorlds (ignoreStatusChanges, so that only a
// change of spec or metadata triggers a sync) calling hook, and creates
// the HelloWorld ns/name.
func startSwitchController(t *testing.T, hook *switchHook, ns, name string, flags ...string) (metactl string, p *testenv.Process) {
	t.Helper()
	metactl = testenv.BuildMetactl(t)
	// Open what the test executes, so that `go test` caches no result of
	// an older binary (a file this new makes the result uncacheable).
	if f, err := os.Open(metactl); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	p = testenv.StartProcess(t, metactl, append([]string{"run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--workers", "2", "--cache-resync", "0"}, flags...)...)
	// A test before may have deleted the example's CRD.
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	controller := filepath.Join(t.TempDir(), "controller.yaml")
	manifest := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: resync-%s
spec:
  generateSelector: true
  parentResource:
    apiVersion: example.metactl.io/v1
    resource: helloworlds
    ignoreStatusChanges: true
  hooks:
    sync:
      webhook:
        url: %s/sync
`, ns, hook.URL)
	if err := os.WriteFile(controller, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", controller)
	deleteOnCleanup(t, controller)
	parent := filepath.Join(t.TempDir(), "parent.yaml")
	if err := os.WriteFile(parent, []byte("apiVersion: example.metactl.io/v1\nkind: HelloWorld\nmetadata:\n  name: "+name+"\nspec:\n  who: resync\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "HelloWorld "+ns+"/"+name+" created (the CRD served)", func(ctx context.Context) (bool, error) {
		_, err := env.Kubectl(ctx, "apply", "-n", ns, "-f", parent)
		return err == nil, err
	})
	deleteOnCleanup(t, parent, "-n", ns)
	return metactl, p
}

// waitRetryLog waits until metactl has logged the failed sync of key as
// the given attempt, and returns that log line.
func waitRetryLog(t *testing.T, p *testenv.Process, key string, attempt int, timeout time.Duration) string {
	t.Helper()
	var line string
	testenv.Eventually(t, timeout, fmt.Sprintf("metactl to log the failed sync of %s, attempt %d", key, attempt), func(context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			t.Fatalf("metactl exited: %v", err)
		}
		line = retryLogLine(p.Output(), key, attempt)
		return line != "", nil
	})
	return line
}

func retryLogLine(out, key string, attempt int) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"Sync failed; retrying"`) && strings.Contains(line, `key="`+key+`"`) &&
			strings.Contains(line, fmt.Sprintf(" attempt=%d", attempt)) {
			return line
		}
	}
	return ""
}

// TestResyncSyncsARecoveredParentNow: a parent whose hook has failed seven
// times in a row has its next retry 16 s away, and metactl's log says so;
// once the hook is back, `metactl resync helloworlds/NAME -n NS` gets it
// synced at once (by a metadata change, which ignoreStatusChanges does not
// filter), and the hook sees the annotation the command set.
func TestResyncSyncsARecoveredParentNow(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := startSwitchHook(t)
	metactl, p := startSwitchController(t, hook, ns, "a")

	line := waitRetryLog(t, p, ns+"/a", 7, time.Minute)
	failedAt := time.Now()
	if !strings.Contains(line, `after="16s"`) {
		t.Errorf("the 7th failure's log line does not say the retry comes after 16s:\n%s", line)
	}
	hook.failing.Store(false)

	out, err := exec.Command(metactl, "resync", "helloworlds/a", "-n", ns, "--kubeconfig", env.KubeconfigPath).CombinedOutput()
	if err != nil {
		t.Fatalf("metactl resync: %v\n%s", err, out)
	}
	if want := "helloworlds.example.metactl.io " + ns + "/a: resync requested"; strings.TrimSpace(string(out)) != want {
		t.Errorf("metactl resync printed %q, want %q", out, want)
	}
	parent, err := env.Dynamic.Resource(exampleGVR("helloworlds")).Namespace(ns).Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requested := parent.GetAnnotations()[resyncAnnotation]
	if _, err := time.Parse(time.RFC3339Nano, requested); err != nil {
		t.Fatalf("annotation %s = %q, want a time: %v", resyncAnnotation, requested, err)
	}
	waitFor(t, settle, exampleGVR("helloworlds"), ns, "a", "status.resync "+requested, func(u *unstructured.Unstructured) bool {
		return nestedString(u, "status", "resync") == requested
	})
	// The backoff alone would have called the hook 16 s after the 7th
	// failure, at the earliest 16 s after failedAt less one poll.
	if took := hook.firstSuccess().Sub(failedAt); took > 10*time.Second {
		t.Errorf("the hook was called %v after the resync request, want well within the 16s backoff", took)
	}
}

// TestMaxRetryDelayCapsTheBackoff: with --max-retry-delay 1s (what
// `metactl dev` sets, at 5s), the retries of a failing parent stop
// doubling at 1s.
func TestMaxRetryDelayCapsTheBackoff(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := startSwitchHook(t)
	_, p := startSwitchController(t, hook, ns, "b", "--max-retry-delay", "1s")
	for attempt, after := range map[int]string{3: "1s", 4: "1s", 5: "1s"} {
		if line := waitRetryLog(t, p, ns+"/b", attempt, time.Minute); !strings.Contains(line, `after="`+after+`"`) {
			t.Errorf("failure %d was not retried after %s:\n%s", attempt, after, line)
		}
	}
	// Attempt 1 still starts at 250ms.
	if line := retryLogLine(p.Output(), ns+"/b", 1); !strings.Contains(line, `after="250ms"`) {
		t.Errorf("the first failure was not retried after 250ms:\n%s", line)
	}
}
