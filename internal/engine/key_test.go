package engine

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// TestKeyInJSONLogs: a key logged with --log-format=json (klog through
// slog's JSON handler, as internal/cli sets it up) is its text, as in
// text logs, not a struct JSON cannot encode.
func TestKeyInJSONLogs(t *testing.T) {
	var buf bytes.Buffer
	klog.SetSlogLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(klog.ClearLogger)
	res := &Watched{KeyPrefix: "1|", Selects: func(metav1.Object) bool { return true }}
	klog.Background().Info("Synced", "key", Key{Resource: res, Namespace: "ns", Name: "a"})
	klog.Flush()
	line := strings.TrimSpace(buf.String())
	var got map[string]any
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	if got["key"] != "1|ns/a" {
		t.Errorf("key logged as %#v, want \"1|ns/a\" (line %s)", got["key"], line)
	}
}
