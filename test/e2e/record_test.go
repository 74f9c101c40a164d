package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/hookrecord"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/dynamic/secretdigest"
)

// recordSecret is the value of the Secret child the recording test's hook
// asks for.
const recordSecret = "hunter2-e2e-recorded"

// recordHook answers each HelloWorld with a Secret child NAME-secret
// holding recordSecret, and its spec.who in the status.
func recordHook(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     map[string]any    `json:"spec"`
			} `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": map[string]any{"who": req.Parent.Spec["who"]},
			"children": []any{map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": req.Parent.Metadata.Name + "-secret"},
				"stringData": map[string]any{"password": recordSecret},
			}},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRecordFetch runs `metactl run --record-max-calls 2`, the binary,
// with two CompositeControllers of HelloWorlds on the same hook, one
// annotated metactl.io/record: "true": `metactl record fetch` of that one
// writes a set that hookrecord.ReadDir reads, its newest two calls only
// (the last answering the last spec), no Secret value in any file, and a
// second fetch writes nothing again; a fetch of the other one fails,
// naming the annotation to set.
func TestRecordFetch(t *testing.T) {
	ns := env.CreateNamespace(t)
	statSources(t) // a change to metactl's sources runs it again
	metactl := testenv.BuildMetactl(t)
	// metactl listens on every interface, so that the API server's Pod
	// proxy reaches it at this machine's address too.
	port := testenv.FreePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := testenv.StartProcess(t, metactl, "run", "--allow-loopback-hooks", "--debug-auth=false", "--kubeconfig", env.KubeconfigPath, "--record-max-calls", "2",
		"--metrics-addr", fmt.Sprintf(":%d", port), "--health-addr", "127.0.0.1:0", "--workers", "2", "--cache-resync", "0", "--max-retry-delay", "2s")
	waitListening(t, p, port)

	hook := recordHook(t)
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	recorded, plain := "record-"+ns, "plain-"+ns
	manifest := writeManifests(t,
		helloWorldController{name: recorded, label: recorded, hookURL: hook.URL, record: true, children: "secrets", inPlace: true}.yaml(),
		helloWorldController{name: plain, label: plain, hookURL: hook.URL, children: "secrets", inPlace: true}.yaml())
	kubectl(t, "apply", "-f", manifest)
	deleteOnCleanup(t, manifest)
	waitControllerReady(t, "compositecontrollers", recorded)
	waitControllerReady(t, "compositecontrollers", plain)
	// One parent per controller; spec.who changed three times: four
	// syncs or more of each.
	parents := filepath.Join(t.TempDir(), "parents.yaml")
	for i, who := range []string{"first", "second", "third", "last"} {
		var docs []string
		for _, name := range []string{recorded, plain} {
			docs = append(docs, fmt.Sprintf("apiVersion: example.metactl.io/v1\nkind: HelloWorld\nmetadata:\n  name: %s\n  labels: {test: %s}\nspec:\n  who: %s\n", name, name, who))
		}
		if err := os.WriteFile(parents, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		kubectl(t, "apply", "-n", ns, "-f", parents)
		if i == 0 {
			deleteOnCleanup(t, parents, "-n", ns)
		}
		for _, name := range []string{recorded, plain} {
			waitFor(t, settle, exampleGVR("helloworlds"), ns, name, "status.who "+who, func(o *unstructured.Unstructured) bool {
				return o != nil && nestedString(o, "status", "who") == who
			})
		}
	}

	dir := filepath.Join(t.TempDir(), "recorded")
	fetch := func(controller string) (string, error) {
		return explainRun(metactl, "record", "fetch", "compositecontroller/"+controller, "--record-dir", dir, "--endpoint", endpoint)
	}
	out, err := fetch(recorded)
	if err != nil {
		t.Fatalf("metactl record fetch: %v\n%s", err, out)
	}
	files, err := hookrecord.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the fetched set: %v (fetch said %s)", err, out)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if len(files) != 2 || names[0] != "0001-sync.json" || names[1] != "0002-sync.json" {
		t.Fatalf("fetched %v; want the newest 2 calls (--record-max-calls 2)", names)
	}
	last := files[1]
	request, response := compactJSON(t, last.Request), compactJSON(t, last.Response)
	if last.Controller != "compositecontroller/"+recorded || last.Object != ns+"/"+recorded || last.Code != 200 ||
		!strings.Contains(request, `"spec":{"who":"last"}`) || !strings.Contains(response, `"status":{"who":"last"}`) {
		t.Errorf("the newest call (%s %s %s, code %d) is not the sync of the last spec:\nrequest %s\nresponse %s", last.Controller, last.Hook, last.Object, last.Code, request, response)
	}
	digested := false
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), recordSecret) || strings.Contains(string(raw), base64.StdEncoding.EncodeToString([]byte(recordSecret))) {
			t.Errorf("%s holds the Secret's value:\n%s", f.Name, raw)
		}
		for _, v := range []string{recordSecret, base64.StdEncoding.EncodeToString([]byte(recordSecret))} {
			if unsalted := strings.TrimPrefix(secretdigest.Of(v), secretdigest.Prefix); strings.Contains(string(raw), unsalted) {
				t.Errorf("%s holds the unsalted digest of the Secret's value, which anyone can check a guess against", f.Name)
			}
		}
		digested = digested || strings.Contains(string(raw), `"password": "hmac-sha256:`)
	}
	if !digested {
		t.Errorf("no fetched call holds the Secret child's password as a digest")
	}

	// Fetched again: nothing new.
	if out, err := fetch(recorded); err != nil || !strings.Contains(out, "in "+dir+" already") {
		t.Errorf("a second fetch: %v\n%s", err, out)
	}
	if again, _ := hookrecord.ReadDir(dir); len(again) != 2 {
		t.Errorf("a second fetch left %d calls; want 2", len(again))
	}
	// The controller without the annotation records nothing.
	out, err = fetch(plain)
	if err == nil || !strings.Contains(out, "metactl.io/record") || !strings.Contains(out, "404") {
		t.Errorf("a fetch of a controller not annotated: %v\n%s", err, out)
	}

	// Through the API server's Pod proxy: a Pod object labelled as the
	// Deployment's Pods are, whose IP is this machine's (as TestExplain).
	podNS, _ := metactlPod(t)
	proxied := filepath.Join(t.TempDir(), "proxied")
	throughPods := func(controller string) (string, error) {
		return explainRun(metactl, "record", "fetch", "cc/"+controller, "--record-dir", proxied, "--kubeconfig", env.KubeconfigPath,
			"--metactl-namespace", podNS, "--metactl-port", fmt.Sprint(port))
	}
	if out, err := throughPods(recorded); err != nil {
		t.Errorf("record fetch through the Pod proxy: %v\n%s", err, out)
	} else if got, err := hookrecord.ReadDir(proxied); err != nil || len(got) != 2 || !got[1].Time.Equal(last.Time) {
		t.Errorf("record fetch through the Pod proxy wrote %d calls (%v); want the same 2", len(got), err)
	}
	if out, err := throughPods(plain); err == nil || !strings.Contains(out, "metactl.io/record") {
		t.Errorf("record fetch through the Pod proxy of a controller not annotated: %v\n%s", err, out)
	}
}

// compactJSON returns b without its white space.
func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return out.String()
}
