package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/metactl/metactl/internal/testenv"
)

// pluginRunner runs the real kubectl of the control plane with a folder
// holding kubectl-metactl first on $PATH, $HOME an empty folder (no
// ~/.kube/config) and no $KUBECONFIG unless a call sets it: what the
// plugin gets is only what kubectl passes it.
type pluginRunner struct {
	kubectl string
	env     []string
}

func newPluginRunner(t *testing.T, pluginDir string) *pluginRunner {
	t.Helper()
	environ := []string{"PATH=" + pluginDir + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "PATH" && name != "HOME" && name != "KUBECONFIG" {
			environ = append(environ, kv)
		}
	}
	return &pluginRunner{kubectl: filepath.Join(env.AssetsDir, "kubectl"), env: environ}
}

// command is kubectl with args, and the further variables of environ
// (such as KUBECONFIG=...).
func (r *pluginRunner) command(ctx context.Context, environ []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.kubectl, args...)
	cmd.Env = append(append([]string{}, r.env...), environ...)
	return cmd
}

// run runs kubectl with args and returns its combined output and exit
// code.
func (r *pluginRunner) run(t *testing.T, environ []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := r.command(ctx, environ, args...).CombinedOutput()
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(out), exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), 0
}

// installPlugin copies the binary at from into a new folder as
// kubectl-metactl, as a user installs it, and returns the folder.
func installPlugin(t *testing.T, from string) string {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubectl-metactl"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pluginKubeconfig writes a kubeconfig whose current context is an API
// server that does not answer, and whose context "metactl-test" is the
// test control plane's, with namespace ns.
func pluginKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	config, err := clientcmd.LoadFromFile(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	current := config.Contexts[config.CurrentContext]
	if current == nil {
		t.Fatalf("%s: no current context", env.KubeconfigPath)
	}
	test := current.DeepCopy()
	test.Namespace = ns
	config.Contexts["metactl-test"] = test
	config.Clusters["unreachable"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	config.Contexts["unreachable"] = &clientcmdapi.Context{Cluster: "unreachable", AuthInfo: current.AuthInfo, Namespace: ns}
	config.CurrentContext = "unreachable"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlPlugin: the metactl binary, copied as kubectl-metactl into a
// folder first on $PATH, is a plugin of the real kubectl: kubectl plugin
// list shows it; kubectl completes its flags through the same binary as
// kubectl_complete-metactl; kubectl metactl version prints the version line (-o json
// too, and the -ldflags values of a release build); help, usage and
// errors say "kubectl metactl"; and every subcommand a plugin user runs
// works through kubectl against the test control plane, which kubectl
// passes neither --kubeconfig nor --context: plan (with $KUBECONFIG, then
// with --kubeconfig and --context, its exit code 2 kept), run, explain,
// resync, record fetch, replay and hook test, with --context and the
// context's namespace, while the kubeconfig's current context does not
// answer.
func TestKubectlPlugin(t *testing.T) {
	ns := env.CreateNamespace(t)
	metactl := testenv.BuildMetactl(t)
	pluginDir := installPlugin(t, metactl) // read: a new binary makes the result uncacheable
	k := newPluginRunner(t, pluginDir)

	// kubectl finds it.
	out, code := k.run(t, nil, "plugin", "list")
	if code != 0 || !strings.Contains(out, filepath.Join(pluginDir, "kubectl-metactl")) {
		t.Errorf("kubectl plugin list: exit %d, want it to list %s:\n%s", code, filepath.Join(pluginDir, "kubectl-metactl"), out)
	}

	// version: the one line, and -o json with the same Go version.
	out, code = k.run(t, nil, "metactl", "version")
	if code != 0 || !strings.HasPrefix(out, "metactl ") || !strings.HasSuffix(out, runtime.Version()+")\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("kubectl metactl version: exit %d, want one line \"metactl VERSION (... %s)\":\n%s", code, runtime.Version(), out)
	}
	out, code = k.run(t, nil, "metactl", "version", "-o", "json")
	var v struct{ Version, Commit, GoVersion string }
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version == "" || v.GoVersion != runtime.Version() {
		t.Errorf("kubectl metactl version -o json: exit %d, %v:\n%s", code, err, out)
	}

	// Completion: kubectl runs kubectl_complete-metactl, the same binary.
	if err := os.Symlink(filepath.Join(pluginDir, "kubectl-metactl"), filepath.Join(pluginDir, "kubectl_complete-metactl")); err != nil {
		t.Fatal(err)
	}
	out, code = k.run(t, nil, "__complete", "metactl", "plan", "--con")
	if code != 0 || !strings.Contains(out, "--context\t") || !strings.Contains(out, "--controller\t") {
		t.Errorf("kubectl __complete metactl plan --con: exit %d, want --context and --controller:\n%s", code, out)
	}

	// help, usage and errors name the plugin as users type it.
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"metactl", "--help"}, 0, []string{"kubectl metactl [command]", `Use "kubectl metactl [command] --help"`}},
		{[]string{"metactl", "plan", "--help"}, 0, []string{"kubectl metactl plan (RESOURCE/NAME | -f FILE) [flags]", "  kubectl metactl plan helloworlds/your-name", "--context string", "-n, --namespace string"}},
		{[]string{"metactl", "run", "--help"}, 0, []string{"kubectl metactl run [flags]", "--kubeconfig string", "--context string"}},
		{[]string{"metactl", "nosuch"}, 1, []string{`unknown command "nosuch" for "kubectl metactl"`}},
		{[]string{"metactl", "plan", "--bogus"}, 1, []string{"unknown flag: --bogus"}},
	} {
		out, code := k.run(t, nil, tc.args...)
		if code != tc.code {
			t.Errorf("kubectl %s: exit %d, want %d:\n%s", strings.Join(tc.args, " "), code, tc.code, out)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, out)
			}
		}
		if strings.Contains(out, "\n  metactl ") || strings.Contains(out, "Usage:\n  metactl") {
			t.Errorf("kubectl %s shows a command line of metactl, not kubectl metactl:\n%s", strings.Join(tc.args, " "), out)
		}
	}

	// The cluster: HelloWorlds, a hook answering each with a ConfigMap,
	// and a controller of those labelled test=plugin that records its
	// calls.
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	hook := explainHook(t)
	controllerName := "plugin-" + ns
	controller := writeManifests(t, helloWorldController{name: controllerName, label: "plugin", hookURL: hook.URL, record: true}.yaml())
	parent := filepath.Join(t.TempDir(), "parent.yaml")
	if err := os.WriteFile(parent, []byte("apiVersion: example.metactl.io/v1\nkind: HelloWorld\nmetadata:\n  name: plugin\n  labels: {test: plugin}\nspec:\n  who: plugin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	childLine := "ConfigMap " + ns + "/plugin-greeting: create"

	// plan with $KUBECONFIG, which kubectl passes on: changes, exit 2.
	plan := []string{"metactl", "plan", "-f", parent, "--controller", controller}
	withEnv := []string{"KUBECONFIG=" + env.KubeconfigPath}
	testenv.Eventually(t, settle, "kubectl metactl plan with $KUBECONFIG exits 2 (the CRD served)", func(context.Context) (bool, error) {
		out, code = k.run(t, withEnv, append(plan, "-n", ns)...)
		if code != 2 {
			return false, fmt.Errorf("exit %d:\n%s", code, out)
		}
		return true, nil
	})
	if !strings.Contains(out, childLine) {
		t.Errorf("kubectl metactl plan lacks %q:\n%s", childLine, out)
	}

	// A kubeconfig whose current context does not answer: --context picks
	// the test control plane, and its namespace is the object's.
	kubeconfig := pluginKubeconfig(t, ns)
	out, code = k.run(t, nil, append(plan, "--kubeconfig", kubeconfig, "--context", "metactl-test")...)
	if code != 2 || !strings.Contains(out, childLine) {
		t.Errorf("kubectl metactl plan --kubeconfig --context: exit %d, want 2 and %q:\n%s", code, childLine, out)
	}
	withFile := []string{"KUBECONFIG=" + kubeconfig}
	if out, code = k.run(t, withFile, plan...); code != 1 || !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("kubectl metactl plan in the unreachable current context: exit %d, want 1 naming its server:\n%s", code, out)
	}
	out, code = k.run(t, withFile, "metactl", "hook", "test", "--controller", controller, "--parent", parent, "--hook-url", hook.URL, "--context", "metactl-test")
	// The resources resolved by the discovery of the cluster --context
	// names (the unreachable current context would leave them offline).
	discovered := "CompositeController " + controllerName + " (resources: cluster)"
	if (code != 0 && code != 2) || !strings.Contains(out, discovered) {
		t.Errorf("kubectl metactl hook test --context: exit %d, want 0 or 2 and %q:\n%s", code, discovered, out)
	}

	// run, through kubectl, in the context --context names.
	port := testenv.FreePort(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := testenv.StartCommand(t, k.command(context.Background(), withFile, "metactl", "run", "--allow-loopback-hooks", "--debug-auth=false", "--context", "metactl-test",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--health-addr", "127.0.0.1:0", "--workers", "2", "--cache-resync", "0"))
	waitListening(t, p, port)
	kubectl(t, "apply", "-f", controller)
	deleteOnCleanup(t, controller)
	kubectl(t, "apply", "-n", ns, "-f", parent)
	deleteOnCleanup(t, parent, "-n", ns)
	waitFor(t, settle, configmapsGVR, ns, "plugin-greeting", "the child metactl run (as kubectl metactl run) made", func(u *unstructured.Unstructured) bool { return u != nil })

	// explain, resync, record fetch and replay.
	controllerLine := "Controller:   CompositeController " + controllerName + " (parent)"
	out, code = k.run(t, withFile, "metactl", "explain", "helloworlds/plugin", "--context", "metactl-test", "--endpoint", endpoint)
	if code != 0 || !strings.Contains(out, controllerLine) || !strings.Contains(out, "State:        Synced\n") {
		t.Errorf("kubectl metactl explain --context: exit %d, want %q, Synced:\n%s", code, controllerLine, out)
	}
	out, code = k.run(t, nil, "metactl", "resync", "hello/plugin", "-n", ns, "--kubeconfig", kubeconfig, "--context", "metactl-test")
	if code != 0 || get(t, exampleGVR("helloworlds"), ns, "plugin").GetAnnotations()["metactl.io/resync-requested"] == "" {
		t.Errorf("kubectl metactl resync -n --kubeconfig --context: exit %d, the object not annotated:\n%s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "recorded")
	out, code = k.run(t, withFile, "metactl", "record", "fetch", "cc/"+controllerName, "--record-dir", dir, "--context", "metactl-test", "--endpoint", endpoint)
	if code != 0 || !strings.Contains(out, "wrote ") {
		t.Fatalf("kubectl metactl record fetch: exit %d:\n%s", code, out)
	}
	out, code = k.run(t, nil, "metactl", "replay", dir, "--hook-url", hook.URL)
	if code != 0 {
		t.Errorf("kubectl metactl replay of the calls fetched, to the same hook: exit %d, want 0:\n%s", code, out)
	}
	// kubectl execs the plugin: the signal reaches metactl, which stops
	// cleanly.
	p.Stop(t, syscall.SIGTERM, settle)

	// A release build: -ldflags set the version and commit.
	release := t.TempDir()
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v0.0.0-plugin-e2e -X main.commit=0123456789ab", "-o", filepath.Join(release, "kubectl-metactl"), "./cmd/metactl")
	build.Dir = repo(t)
	var buildOut bytes.Buffer
	build.Stdout, build.Stderr = &buildOut, &buildOut
	if err := build.Run(); err != nil {
		t.Fatalf("go build -ldflags: %v\n%s", err, buildOut.String())
	}
	want := "metactl v0.0.0-plugin-e2e (commit 0123456789ab, " + runtime.Version() + ")\n"
	if out, code := newPluginRunner(t, release).run(t, nil, "metactl", "version"); code != 0 || out != want {
		t.Errorf("kubectl metactl version of a build with -ldflags: exit %d, %q, want %q", code, out, want)
	}
}
