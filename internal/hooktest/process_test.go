package hooktest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// startHookProcess runs testdata/job-audit-hook.py with args and returns
// its base URL; the process ends with the test.
func startHookProcess(t *testing.T, args ...string) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the hook process cannot run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, python, append([]string{"testdata/job-audit-hook.py"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	port := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		port <- strings.TrimSpace(line)
	}()
	select {
	case p := <-port:
		if p == "" {
			t.Fatal("the hook process printed no port")
		}
		return "http://127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatal("the hook process did not start within 30s")
	}
	return ""
}

// runProcess runs hook test on testdata/job-audit-controller.yaml against
// the hook process at url.
func runProcess(t *testing.T, url string) *Report {
	t.Helper()
	raw, err := os.ReadFile("testdata/job-audit-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	controller := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &controller.Object); err != nil {
		t.Fatal(err)
	}
	resources, _ := OfflineResources([]*apiextensionsv1.CustomResourceDefinition{crd}, nil, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report, err := Run(ctx, Options{Controller: controller, Parent: parentObject(), Resources: resources, HookURL: url, Offline: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return report
}

// TestFinalizeHookThatWaitsForItsChildren: a finalize hook (a real
// process) that asks for an audit ConfigMap and is finalized once its Job
// is gone and the ConfigMap exists passes: hook test writes what each
// answer asks for and hands the children back, round after round, as the
// engine does.
func TestFinalizeHookThatWaitsForItsChildren(t *testing.T) {
	r := runProcess(t, startHookProcess(t))
	if len(r.Findings) != 0 {
		t.Fatalf("findings:\n%s", text(r))
	}
	var names []string
	for _, q := range r.Requests {
		names = append(names, q.Name)
	}
	for _, want := range []string{"finalizing-children", "finalizing-children-2", "finalizing-no-children", "finalizing-no-children-2"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("requests %v, want %s", names, want)
		}
	}
}

// TestBadChildNameFails: a child named Bad_Name!, which the API server
// refuses, is an invalid-children error, in the words of the writer's
// rule (children.CheckName).
func TestBadChildNameFails(t *testing.T) {
	r := runProcess(t, startHookProcess(t, "--bad-name"))
	f := only(t, r, CheckInvalidChildren, Error)
	if !strings.Contains(f[0].Message, `invalid metadata.name "Bad_Name!" for a Job`) {
		t.Errorf("message %q does not say the name is invalid", f[0].Message)
	}
	if r.Errors == 0 {
		t.Error("the report counts no error: the exit code would be 0")
	}
}
