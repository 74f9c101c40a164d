package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/testenv"
)

// randomValue returns a value found nowhere else.
func randomValue(t *testing.T, prefix string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// TestSecretsNeverLogged runs metactl at -v=10 with a controller whose
// hook (HTTPS, a URL with a user's password and a token in its query, a
// Bearer token from a Secret) creates a Secret child with a random value,
// then fails, echoing its request (the Secret child's data) and its
// Authorization header. None of the random values may appear in
// metactl's output, in any Event, or in the controller's status; the
// output must show that it logged at its highest verbosity (client-go's
// request headers, metactl's hook bodies), so that the test cannot pass
// with logging broken.
func TestSecretsNeverLogged(t *testing.T) {
	ctx := context.Background()
	metactl := testenv.BuildMetactl(t)
	// Open what the test executes, so that `go test` caches no result of
	// an older binary (a file this new makes the result uncacheable).
	if f, err := os.Open(metactl); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	ns := env.CreateNamespace(t)
	childValue := randomValue(t, "child-")
	token := randomValue(t, "token-")
	urlPassword := randomValue(t, "urlpw-")
	queryToken := randomValue(t, "query-")

	// The credential Secret, in metactl's own namespace when it runs
	// outside a cluster ("default").
	tokenSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-token-" + ns, Namespace: "default"},
		StringData: map[string]string{"token": token}}
	if _, err := env.Kube.CoreV1().Secrets("default").Create(ctx, tokenSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().Secrets("default").Delete(context.Background(), tokenSecret.Name, metav1.DeleteOptions{})
	})

	var created, failed atomic.Int64
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "wrong credentials", http.StatusUnauthorized)
			return
		}
		var req struct {
			Parent   map[string]any            `json:"parent"`
			Children map[string]map[string]any `json:"children"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.Children["Secret.v1"]) == 0 {
			created.Add(1)
			name := req.Parent["metadata"].(map[string]any)["name"].(string)
			_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": name + "-secret"},
				"stringData": map[string]any{"value": childValue},
			}}})
			return
		}
		// Fail, echoing the children first (within the first KiB) and the
		// credentials.
		failed.Add(1)
		children, _ := json.Marshal(req.Children)
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "cannot sync: children %s, authorization %q, request %s", children, r.Header.Get("Authorization"), body)
	}))
	t.Cleanup(hook.Close)
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}))
	hookURL := strings.Replace(hook.URL, "https://", "https://metactl:"+urlPassword+"@", 1) + "/sync?token=" + queryToken

	p := testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--kubeconfig", env.KubeconfigPath, "-v", "10",
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--workers", "2", "--discovery-interval", "2s")
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	controller := map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "secrets-" + ns},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "helloworlds"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{
				"url":           hookURL,
				"caBundle":      map[string]any{"inline": ca},
				"authorization": map[string]any{"type": "Bearer", "secretRef": map[string]any{"name": tokenSecret.Name, "namespace": "default"}},
			}}},
		},
	}
	file := filepath.Join(t.TempDir(), "controller.json")
	data, _ := json.Marshal(controller)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", file)
	deleteOnCleanup(t, file)
	kubectl(t, "apply", "-n", ns, "-f", repo(t, "examples", "python", "hello-world", "sample.yaml"))

	testenv.Eventually(t, time.Minute, "the Secret child created and the hook failing twice", func(context.Context) (bool, error) {
		return created.Load() > 0 && failed.Load() >= 2, nil
	})
	testenv.Eventually(t, time.Minute, "a SyncError Event on the parent", func(ctx context.Context) (bool, error) {
		events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, ignoreDeadline(ctx, err)
		}
		for _, e := range events.Items {
			if e.Reason == "SyncError" && strings.Contains(e.Message, "HTTP 500") {
				t.Logf("the Event: %s", e.Message)
				return true, nil
			}
		}
		return false, nil
	})
	p.Stop(t, syscall.SIGTERM, 30*time.Second)

	secrets := map[string]string{
		"the Secret child's value":          childValue,
		"the Secret child's value (base64)": base64.StdEncoding.EncodeToString([]byte(childValue)),
		"the hook token":                    token,
		"the hook token (base64)":           base64.StdEncoding.EncodeToString([]byte(token)),
		"the URL's password":                urlPassword,
		"the URL's query token":             queryToken,
	}
	check := func(where, text string) {
		t.Helper()
		for what, value := range secrets {
			if strings.Contains(text, value) {
				t.Errorf("%s holds %s", where, what)
			}
		}
	}
	output := p.Output()
	check("metactl's output", output)
	events, err := env.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		check(fmt.Sprintf("Event %s/%s (%s)", e.Namespace, e.Name, e.Reason), e.Message)
	}
	cc := get(t, schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}, "", "secrets-"+ns)
	status, _ := json.Marshal(cc.Object["status"])
	check("the controller's status", string(status))

	// The Secret child's value as the hook request's log line shows it.
	const redactedValue = `\"value\":\"<redacted>\"`
	// It logged at its highest verbosity: client-go's request headers (7),
	// the hook's bodies with the Secret's data redacted (6).
	for _, want := range []string{
		"Logging at the highest verbosity",
		`"Request" verb="GET"`, "headers=",
		`"Hook request"`, "your-name-secret", redactedValue,
		"HTTP 500",
	} {
		if !strings.Contains(output, want) {
			t.Errorf("metactl's output lacks %q", want)
		}
	}
}
