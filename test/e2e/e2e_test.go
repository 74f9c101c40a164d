package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelloWorldPython runs metactl run and the Python hello-world hook as
// processes, drives the example with kubectl, and stops metactl with
// SIGTERM, which must end it cleanly with exit code 0.
func TestHelloWorldPython(t *testing.T) {
	began := time.Now()
	ex := startExample(t, "python", "hello-world")
	ns := env.CreateNamespace(t)
	ex.applySample(t, ns)
	helloworlds := exampleGVR("helloworlds")
	greeting := func(want string) func(*unstructured.Unstructured) bool {
		return func(o *unstructured.Unstructured) bool {
			return nestedString(o, "data", "greeting") == want
		}
	}
	t.Logf("%v: applied", time.Since(began))
	waitFor(t, time.Minute, configmapsGVR, ns, "your-name-greeting", "greets World", greeting("Hello, World!"))
	t.Logf("%v: greets World", time.Since(began))
	waitFor(t, time.Minute, helloworlds, ns, "your-name", "status greets World", func(o *unstructured.Unstructured) bool {
		return nestedString(o, "status", "greeting") == "Hello, World!"
	})

	kubectl(t, "patch", "-n", ns, "helloworld", "your-name", "--type", "merge", "-p", `{"spec":{"who":"metactl"}}`)
	t.Logf("%v: patched", time.Since(began))
	waitFor(t, time.Minute, configmapsGVR, ns, "your-name-greeting", "greets metactl", greeting("Hello, metactl!"))
	t.Logf("%v: greets metactl", time.Since(began))

	out, err := env.Kubectl(context.Background(), "get", "cc", "hello-world")
	if err != nil || !strings.Contains(out, "True") {
		t.Errorf("kubectl get cc hello-world: want READY True, got %v\n%s", err, out)
	}

	kubectl(t, "delete", "-n", ns, "helloworld", "your-name", "--wait=false")
	waitGone(t, settle, configmapsGVR, ns, "your-name-greeting")
	t.Logf("%v: deleted; sending SIGTERM", time.Since(began))

	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
	if !strings.Contains(ex.metactl.Output(), "Stopped") {
		t.Errorf("metactl run did not log its orderly stop")
	}
}
