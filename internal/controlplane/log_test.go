package controlplane

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogToKlog: what envtest logs through controller-runtime reaches
// klog; without a logger, controller-runtime drops it and, 30 seconds
// after the program started, prints a warning with a goroutine stack.
func TestLogToKlog(t *testing.T) {
	var out syncBuffer
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
