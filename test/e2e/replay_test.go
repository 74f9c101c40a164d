package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/replay"
	"github.com/metactl/metactl/internal/testenv"
)

// TestReplayExamples runs hack/replay-examples.sh with the metactl built
// from this tree: every example's recorded set, replayed against the
// example's hook running as a process, must get the same answers. Every
// example has a recorded set.
func TestReplayExamples(t *testing.T) {
	statSources(t) // a change to metactl's sources (or an example) runs it again
	metactl := testenv.BuildMetactl(t)
	hooks, err := filepath.Glob(repo(t, "examples", "*", "*", "hook.*"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, hook := range hooks {
		dir := filepath.Dir(hook)
		examples = append(examples, filepath.Join(filepath.Base(filepath.Dir(dir)), filepath.Base(dir)))
		files, err := filepath.Glob(filepath.Join(dir, "recorded", "*-*.json"))
		if err != nil || len(files) == 0 {
			t.Errorf("examples/%s has no recorded set (recorded/NNNN-HOOK.json): record one with hack/record-examples.sh", examples[len(examples)-1])
		}
	}
	cmd := exec.Command(repo(t, "hack", "replay-examples.sh"))
	cmd.Env = append(os.Environ(), "METACTL="+metactl)
	// Its own process group, so that a test timeout stops the hooks it
	// started as well.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := testenv.StartCommand(t, cmd)
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err = p.Wait(t, 2*time.Minute)
	out := p.Output()
	if err != nil {
		t.Fatalf("hack/replay-examples.sh: %v\n%s", err, out)
	}
	t.Logf("hack/replay-examples.sh:\n%s", out)
	for _, ex := range examples {
		if !strings.Contains(out, "== "+ex+"\n") {
			t.Errorf("hack/replay-examples.sh did not replay %s", ex)
		}
	}
	// Each set's summary: every call the same (none skipped).
	summaries := summaryLine.FindAllStringSubmatch(out, -1)
	if len(summaries) != len(examples) {
		t.Errorf("%d summaries for %d examples", len(summaries), len(examples))
	}
	for _, m := range summaries {
		if m[1] != m[2] {
			t.Errorf("hack/replay-examples.sh passed, but not every call was the same: %s", m[0])
		}
	}
}

// TestReplayChangedHook replays hello-world's recorded set against a
// changed copy of its hook (it greets with "Hi" instead of "Hello"): the
// built metactl replay exits with code 2 and names each changed field;
// -o json reports the same; --update accepts the new answers, after which
// replay exits 0; and a hook that is not running exits 1.
func TestReplayChangedHook(t *testing.T) {
	statSources(t) // a change to metactl's sources (or an example) runs it again
	metactl := testenv.BuildMetactl(t)
	src := repo(t, "examples", "python", "hello-world")
	hookPy, err := os.ReadFile(filepath.Join(src, "hook.py"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(hookPy), `greeting = f"Hello, {who}!"`, `greeting = f"Hi, {who}!"`, 1)
	if changed == string(hookPy) {
		t.Fatal(`hello-world's hook.py no longer says greeting = f"Hello, {who}!": update this test`)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hook.py"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	// A copy of the recorded set, for --update to rewrite.
	set := filepath.Join(dir, "recorded")
	if err := os.CopyFS(set, os.DirFS(filepath.Join(src, "recorded"))); err != nil {
		t.Fatal(err)
	}
	_, hookURL := startHook(t, "python", dir)

	out, code := runReplay(t, metactl, set, "--hook-url", hookURL)
	if code != 2 {
		t.Fatalf("replay against a changed hook: exit code %d, want 2\n%s", code, out)
	}
	for _, want := range []string{
		" differs\n",
		`    ~ .status.greeting: "Hello, World!" -> "Hi, World!"`,
		`    ~ .children["v1/ConfigMap/your-name-greeting"].data.greeting: "Hello, World!" -> "Hi, World!"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}

	out, code = runReplay(t, metactl, set, "--hook-url", hookURL, "-o", "json")
	var report replay.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 2 {
		t.Fatalf("-o json: exit code %d, %v:\n%s", code, err, out)
	}
	if report.Summary.Differs == 0 || report.Summary.Calls != len(report.Results) {
		t.Errorf("-o json summary %+v", report.Summary)
	}
	for _, res := range report.Results {
		if res.Status == replay.Differs && len(res.Changes) == 0 {
			t.Errorf("-o json: %s differs with no changes", res.File)
		}
	}

	if out, code = runReplay(t, metactl, set, "--hook-url", hookURL, "--update"); code != 0 || !strings.Contains(out, " updated") {
		t.Fatalf("--update: exit code %d, want 0 and updated calls\n%s", code, out)
	}
	if out, code = runReplay(t, metactl, set, "--hook-url", hookURL); code != 0 || strings.Contains(out, "differs") {
		t.Errorf("after --update: exit code %d, want 0\n%s", code, out)
	}

	if out, code = runReplay(t, metactl, set, "--hook-url", "http://127.0.0.1:"+strconv.Itoa(testenv.FreePort(t))); code != 1 || !strings.Contains(out, "no call reached the hook") {
		t.Errorf("no hook running: exit code %d, want 1\n%s", code, out)
	}
	if out, code = runReplay(t, metactl, t.TempDir(), "--hook-url", hookURL); code != 1 || !strings.Contains(out, "no recorded calls") {
		t.Errorf("empty directory: exit code %d, want 1\n%s", code, out)
	}
	if out, code = runReplay(t, metactl, set, "--hook-url-for", "sink="+hookURL); code != 1 || !strings.Contains(out, `unknown hook "sink"`) {
		t.Errorf("--hook-url-for sink=: exit code %d, want 1\n%s", code, out)
	}
}

// summaryLine matches the last line of metactl replay's text output: the
// number of calls and how many were the same.
var summaryLine = regexp.MustCompile(`(?m)^([0-9]+) calls?: ([0-9]+) same,.*$`)

// runReplay runs metactl replay DIR with args, and returns its combined
// output and exit code.
func runReplay(t *testing.T, metactl, dir string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, metactl, append([]string{"replay", dir}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("metactl replay: %v\n%s", err, out)
	return "", 0
}
