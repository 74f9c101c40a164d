package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/loop"
)

// execute runs the command tree with args and returns its output.
func execute(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return executeAs(t, "metactl", args...)
}

// executeAs is execute with the program file argv0 (os.Args[0]), as main
// runs it.
func executeAs(t *testing.T, argv0 string, args ...string) (string, error) {
	t.Helper()
	root := newProgram(argv0, args)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

// TestHelpShowsOnlyUsefulLogFlags: `metactl --help` shows -v and
// --log-format and none of klog's other flags, which still work.
func TestHelpShowsOnlyUsefulLogFlags(t *testing.T) {
	out, err := execute(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-v, --v", "--log-format", "resync", "run", "version", "dev"} {
		if !strings.Contains(out, want) {
			t.Errorf("metactl --help lacks %q:\n%s", want, out)
		}
	}
	for _, hidden := range []string{"--logtostderr", "--vmodule", "--add_dir_header", "--log_file", "--skip_headers", "--log-level"} {
		if strings.Contains(out, hidden) {
			t.Errorf("metactl --help shows %s:\n%s", hidden, out)
		}
	}
	if out, err := execute(t, "--logtostderr=true", "--log-level=2", "version"); err != nil {
		t.Errorf("hidden klog flags no longer parse: %v\n%s", err, out)
	}
}

// TestVersionCommand: `metactl version` prints one line that starts with
// "metactl " and a version, not "dev", which reads as the subcommand.
func TestVersionCommand(t *testing.T) {
	out, err := execute(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "metactl ") || strings.HasPrefix(out, "metactl dev") || strings.Count(out, "\n") != 1 {
		t.Errorf("metactl version printed %q", out)
	}
}

func TestVersionFrom(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc1234def5678901234567890abcdef12345678"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name              string
		info              *debug.BuildInfo
		ldVersion, commit string
		want              string
	}{
		{"build info", info, "", "", "metactl v0.3.0 (commit abc1234def56 with uncommitted changes, go1.26.8)"},
		{"ldflags", info, "v1.2.3", "0123abc", "metactl v1.2.3 (commit 0123abc, go1.26.8)"},
		{"no VCS", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "", "metactl (devel) (go1.26.8)"},
		{"no build info", nil, "", "", "metactl (devel) (go version unknown)"},
	} {
		if got := versionFrom(tc.info, tc.ldVersion, tc.commit).String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRestConfigOrder: as kubectl, --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config; with none of them and no cluster around, an error that
// names them.
func TestRestConfigOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		path := filepath.Join(dir, name)
		config := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\n" +
			"contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flagFile := write("flag", "https://flag.example:6443")
	envFile := write("env", "https://env.example:6443")
	homeFile := write("home", "https://home.example:6443")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	saved := clientcmd.RecommendedHomeFile
	t.Cleanup(func() { clientcmd.RecommendedHomeFile = saved })

	for _, tc := range []struct {
		name, flag, env, home, want string
	}{
		{"flag first", flagFile, envFile, homeFile, "https://flag.example:6443"},
		{"then $KUBECONFIG", "", envFile, homeFile, "https://env.example:6443"},
		{"then ~/.kube/config", "", "", homeFile, "https://home.example:6443"},
		{"nothing", "", "", filepath.Join(dir, "missing"), ""},
	} {
		t.Setenv("KUBECONFIG", tc.env)
		clientcmd.RecommendedHomeFile = tc.home
		_, cfg, err := kubeFlags{kubeconfig: tc.flag}.load("")
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: got a config for %s, want an error", tc.name, cfg.Host)
		case tc.want == "" && (!strings.Contains(err.Error(), "$KUBECONFIG") || !errors.Is(err, errNoKubeconfig)):
			t.Errorf("%s: error %q does not say where it looked, or is not errNoKubeconfig", tc.name, err)
		case tc.want != "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && cfg.Host != tc.want:
			t.Errorf("%s: server %s, want %s", tc.name, cfg.Host, tc.want)
		}
	}
}

func TestRunMaxRetryDelayFlag(t *testing.T) {
	run := newRunCommand()
	if f := run.Flags().Lookup("max-retry-delay"); f == nil || f.DefValue != loop.MaxRetryDelay.String() {
		t.Fatalf("run --max-retry-delay: %+v, want a flag defaulting to %v", f, loop.MaxRetryDelay)
	}
	if out, err := execute(t, "run", "--max-retry-delay", "0s", "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--max-retry-delay") {
		t.Errorf("run --max-retry-delay 0s: %v, want an error about the flag\n%s", err, out)
	}
}

func TestResyncArgs(t *testing.T) {
	for _, args := range [][]string{{"resync"}, {"resync", "helloworlds"}, {"resync", "helloworlds/"}, {"resync", "/a"}, {"resync", "a/b/c"}} {
		if out, err := execute(t, args...); err == nil {
			t.Errorf("metactl %s: no error\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestRunMemoryFlags: the flags that bound what hooks make metactl hold
// exist with their documented defaults (which fit the shipped
// Deployment's 256 MiB memory limit, docs/security.md) and refuse values
// that are not positive.
func TestRunMemoryFlags(t *testing.T) {
	run := newRunCommand()
	for name, want := range map[string]string{
		"hook-response-budget-bytes":         "33554432",
		"hook-response-floor-bytes":          "262144",
		"hook-response-min-bytes-per-second": "1048576",
		"hook-response-grace":                "5s",
		"hook-decoded-budget-bytes":          "67108864",
		"hook-decoded-floor-bytes":           "1048576",
		"etag-cache-max-bytes":               "33554432",
		"max-related-objects":                "10000",
		"max-hook-response-bytes":            "16777216",
	} {
		if f := run.Flags().Lookup(name); f == nil || f.DefValue != want {
			t.Errorf("run --%s: %+v, want a flag defaulting to %s", name, f, want)
		}
		if out, err := execute(t, "run", "--"+name, "0", "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--"+name) {
			t.Errorf("run --%s 0: %v, want an error about the flag\n%s", name, err, out)
		}
	}
}

// TestCredentialNamespacesFlag: entries lose the spaces around them ("a,
// b" names b) and one that is neither a namespace name nor "*" is refused,
// naming the flag.
func TestCredentialNamespacesFlag(t *testing.T) {
	got, err := parseCredentialNamespaces([]string{"a", " b", "* "})
	if err != nil || !slices.Equal(got, []string{"a", "b", "*"}) {
		t.Errorf("parseCredentialNamespaces(a, b, *) = %q, %v; want [a b *]", got, err)
	}
	for _, bad := range []string{"a,B", "a,,b", "a,team.b", "a,x/y"} {
		if out, err := execute(t, "run", "--credential-namespaces", bad, "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--credential-namespaces") {
			t.Errorf("run --credential-namespaces %q: %v, want an error about the flag\n%s", bad, err, out)
		}
	}
}

// TestNoRecordWithoutExplain: the record of syncs is kept only for
// explain: --explain=false, like --history-max-bytes=0, records nothing
// (manager.Options.HistoryMaxBytes 0), and a negative flag likewise.
func TestNoRecordWithoutExplain(t *testing.T) {
	for _, tc := range []struct {
		flag    int64
		explain bool
		want    int64
	}{
		{8 << 20, true, 8 << 20},
		{8 << 20, false, 0},
		{0, true, 0},
		{-1, true, 0},
	} {
		if got := historyMaxBytes(tc.flag, tc.explain); got != tc.want {
			t.Errorf("--history-max-bytes=%d --explain=%v: HistoryMaxBytes %d, want %d", tc.flag, tc.explain, got, tc.want)
		}
	}
}

// TestKubeFlags: every subcommand that talks to a cluster takes kubectl's
// --kubeconfig and --context (kubectl passes a plugin none of its own
// flags), and -n/--namespace when it is about a namespaced object.
func TestKubeFlags(t *testing.T) {
	root := newRootCommand()
	for path, namespaced := range map[string]bool{
		"run": false, "explain": true, "plan": true, "resync": true, "record fetch": false, "hook test": false,
	} {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.CommandPath() != "metactl "+path {
			t.Fatalf("metactl %s: %v", path, err)
		}
		for _, name := range []string{"kubeconfig", "context"} {
			if cmd.Flags().Lookup(name) == nil {
				t.Errorf("metactl %s has no --%s", path, name)
			}
		}
		if f := cmd.Flags().Lookup("namespace"); (f != nil) != namespaced || (f != nil && f.Shorthand != "n") {
			t.Errorf("metactl %s: --namespace %+v, want one (-n) %v", path, f, namespaced)
		}
	}
}

// TestKubeFlagsContextAndNamespace: --context picks a context of the
// kubeconfig other than the current one, and -n overrides the context's
// namespace, as in kubectl.
func TestKubeFlagsContextAndNamespace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	config := `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
contexts:
- {name: a, context: {cluster: a, user: u, namespace: team-a}}
- {name: b, context: {cluster: b, user: u, namespace: team-b}}
current-context: a
users:
- {name: u, user: {token: t}}
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags             kubeFlags
		server, namespace string
	}{
		{kubeFlags{kubeconfig: path}, "https://a.example:6443", "team-a"},
		{kubeFlags{kubeconfig: path, context: "b"}, "https://b.example:6443", "team-b"},
		{kubeFlags{kubeconfig: path, context: "b", namespace: "other"}, "https://b.example:6443", "other"},
	} {
		_, cfg, err := tc.flags.load("")
		if err != nil {
			t.Fatalf("%+v: %v", tc.flags, err)
		}
		ns, _, err := tc.flags.clientConfig().Namespace()
		if err != nil || cfg.Host != tc.server || ns != tc.namespace {
			t.Errorf("%+v: server %s, namespace %s (%v); want %s, %s", tc.flags, cfg.Host, ns, err, tc.server, tc.namespace)
		}
	}
	if _, _, err := (kubeFlags{kubeconfig: path, context: "nope"}).load(""); err == nil || errors.Is(err, errNoKubeconfig) {
		t.Errorf("--context nope: error %v, want one that is not errNoKubeconfig", err)
	}
	// The User-Agent names metactl's version, and the subcommand but for
	// run's.
	version := buildVersion().version
	for command, want := range map[string]string{"": "metactl/" + version, "hook test": "metactl/" + version + " (hook test)"} {
		_, cfg, err := kubeFlags{kubeconfig: path}.load(command)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.UserAgent != want {
			t.Errorf("load(%q): User-Agent %q, want %q", command, cfg.UserAgent, want)
		}
	}
}

// TestPluginName: the program file's name says whether kubectl runs it as
// a plugin, and how kubectl's users type that plugin.
func TestPluginName(t *testing.T) {
	for argv0, want := range map[string]string{
		"/home/u/.local/bin/kubectl-metactl": "kubectl metactl",
		"/bin/kubectl-metactl.exe":           "kubectl metactl",
		"kubectl-meta_ctl":                   "kubectl meta-ctl",
		"kubectl-mc-x":                       "kubectl mc x",
		"./bin/metactl":                      "",
		"/usr/bin/kubectl-":                  "",
	} {
		if got, ok := pluginName(filepath.FromSlash(argv0)); got != want || ok != (want != "") {
			t.Errorf("pluginName(%q) = %q, %v; want %q", argv0, got, ok, want)
		}
		if completesPlugin(argv0) {
			t.Errorf("completesPlugin(%q) = true", argv0)
		}
	}
	if !completesPlugin("/home/u/.local/bin/kubectl_complete-metactl") {
		t.Error("completesPlugin(kubectl_complete-metactl) = false")
	}
}

// TestPluginHelp: as the plugin, help, usage, errors and examples say
// "kubectl metactl", for the root and the subcommands.
func TestPluginHelp(t *testing.T) {
	run := func(args ...string) (string, error) {
		return executeAs(t, filepath.FromSlash("/usr/local/bin/kubectl-metactl"), args...)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"kubectl metactl [command]", `Use "kubectl metactl [command] --help"`}},
		{[]string{"plan", "--help"}, []string{"kubectl metactl plan (RESOURCE/NAME | -f FILE)", "  kubectl metactl plan helloworlds/your-name"}},
		{[]string{"record", "fetch", "--help"}, []string{"kubectl metactl record fetch compositecontroller/NAME", "  kubectl metactl replay testdata/recorded"}},
		{[]string{"hook", "test", "--help"}, []string{"kubectl metactl hook test --controller"}},
	} {
		out, err := run(tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(out, want) {
				t.Errorf("%q lacks %q:\n%s", tc.args, want, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "  metactl ") {
				t.Errorf("%q: an example or usage line runs metactl, not kubectl metactl: %q", tc.args, line)
			}
		}
	}
	if _, err := run("nosuch"); err == nil || !strings.Contains(err.Error(), `for "kubectl metactl"`) {
		t.Errorf("unknown command: %v, want an error naming kubectl metactl", err)
	}
	// As kubectl_complete-metactl, the arguments are completed.
	if out, err := executeAs(t, "kubectl_complete-metactl", "pl"); err != nil || !strings.Contains(out, "plan\t") {
		t.Errorf("kubectl_complete-metactl pl: %v, want plan completed:\n%s", err, out)
	}
}

// TestVersionJSON: `metactl version -o json` prints the same fields as the
// line; another format is refused.
func TestVersionJSON(t *testing.T) {
	out, err := execute(t, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := buildVersion()
	if v["version"] != want.version || v["goVersion"] != want.goVersion || v["modified"] != want.modified {
		t.Errorf("version -o json = %s, want %+v", out, want)
	}
	if _, err := execute(t, "version", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("version -o yaml: %v, want an error about --output", err)
	}
}

// TestEventSourceComponentFlag: --event-source-component defaults to
// metactl's name, and a value the API server would refuse as an Event's
// reporting controller (not a qualified name) is refused, naming the flag.
func TestEventSourceComponentFlag(t *testing.T) {
	run := newRunCommand()
	if f := run.Flags().Lookup("event-source-component"); f == nil || f.DefValue != "metactl" {
		t.Fatalf("run --event-source-component: %+v, want a flag defaulting to metactl", f)
	}
	for _, bad := range []string{"", "meta controller", "-metactl", "a/b/c"} {
		if out, err := execute(t, "run", "--event-source-component", bad, "--kubeconfig", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "--event-source-component") {
			t.Errorf("run --event-source-component %q: %v, want an error about the flag\n%s", bad, err, out)
		}
	}
}
