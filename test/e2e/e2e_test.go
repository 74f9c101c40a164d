package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
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
	// The hook's Ready condition has no lastTransitionTime: metactl fills
	// it, and observedGeneration.
	var readySince string
	waitFor(t, time.Minute, helloworlds, ns, "your-name", "status greets World, Ready since a time", func(o *unstructured.Unstructured) bool {
		ready := helloReady(o)
		readySince, _ = ready["lastTransitionTime"].(string)
		return nestedString(o, "status", "greeting") == "Hello, World!" && ready["status"] == "True" && readySince != "" &&
			ready["observedGeneration"] == o.GetGeneration()
	})
	helloEvent(t, ns, "Hello, World!")

	kubectl(t, "patch", "-n", ns, "helloworld", "your-name", "--type", "merge", "-p", `{"spec":{"who":"metactl"}}`)
	t.Logf("%v: patched", time.Since(began))
	waitFor(t, time.Minute, configmapsGVR, ns, "your-name-greeting", "greets metactl", greeting("Hello, metactl!"))
	t.Logf("%v: greets metactl", time.Since(began))
	// Still Ready: the time it became Ready is kept, at the new generation.
	waitFor(t, time.Minute, helloworlds, ns, "your-name", "status greets metactl, Ready since the same time", func(o *unstructured.Unstructured) bool {
		ready := helloReady(o)
		return nestedString(o, "status", "greeting") == "Hello, metactl!" && ready["lastTransitionTime"] == readySince &&
			ready["observedGeneration"] == o.GetGeneration() && o.GetGeneration() > 1
	})
	helloEvent(t, ns, "Hello, metactl!")

	out, err := env.Kubectl(context.Background(), "get", "cc", "hello-world")
	if err != nil {
		t.Fatalf("kubectl get cc hello-world: %v\n%s", err, out)
	}
	row := tableRow(t, out)
	if row["NAME"] != "hello-world" || row["READY"] != "True" || row["FAILING"] != "0" {
		t.Errorf("kubectl get cc hello-world: want NAME hello-world, READY True, FAILING 0; got %q from\n%s", row, out)
	}

	kubectl(t, "delete", "-n", ns, "helloworld", "your-name", "--wait=false")
	waitGone(t, settle, configmapsGVR, ns, "your-name-greeting")
	t.Logf("%v: deleted; sending SIGTERM", time.Since(began))

	ex.metactl.Stop(t, syscall.SIGTERM, 30*time.Second)
	if !strings.Contains(ex.metactl.Output(), "Stopped") {
		t.Errorf("metactl run did not log its orderly stop")
	}
}

// tableRow reads kubectl's table of one object: each column's value, by
// its header, cut at the header's position (a value may be empty or hold
// spaces).
func tableRow(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a header and one row, got:\n%s", out)
	}
	header, row := lines[0], lines[1]
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	values := map[string]string{}
	for i, start := range starts {
		end := len(header)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		name := strings.TrimSpace(header[start:end])
		if start >= len(row) {
			values[name] = ""
			continue
		}
		values[name] = strings.TrimSpace(row[start:min(end, len(row))])
	}
	return values
}

// helloReady returns the Ready condition of a HelloWorld's status.
func helloReady(o *unstructured.Unstructured) map[string]any {
	if o == nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			return m
		}
	}
	return nil
}

// helloEvent waits for the hook's GreetingChanged Event with message on
// the HelloWorld your-name, recorded once.
func helloEvent(t *testing.T, ns, message string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "a GreetingChanged Event "+message, func(ctx context.Context) (bool, error) {
		events, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=your-name,reason=GreetingChanged"})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Message == message {
				if e.Type != "Normal" || e.Count != 1 {
					return false, fmt.Errorf("GreetingChanged %q: type %s, count %d; want Normal, once", message, e.Type, e.Count)
				}
				return true, nil
			}
		}
		return false, nil
	})
}
