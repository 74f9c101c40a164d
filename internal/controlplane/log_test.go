package controlplane

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestLogToKlog: what envtest logs through controller-runtime reaches
// klog; without a logger, controller-runtime drops it and, 30 seconds
// after the program started, prints a warning with a goroutine stack.
func TestLogToKlog(t *testing.T) {
	var out bytes.Buffer // klog writes on the caller's goroutine
	klog.LogToStderr(false)
	klog.SetOutput(&out)
	t.Cleanup(func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	})
	LogToKlog()
	ctrllog.Log.WithName("test-env").Info("starting control plane")
	klog.Flush()
	if got := out.String(); !strings.Contains(got, "starting control plane") {
		t.Errorf("klog's output %q does not hold the line logged through controller-runtime", got)
	}
}
