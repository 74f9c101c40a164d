package manager_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/manager"
)

// TestHistoryMaxBytes: Options.HistoryMaxBytes's zero, like
// --history-max-bytes=0, keeps no record of syncs, and so does a negative
// value; a positive one keeps it. No API server is asked: New connects to
// none.
func TestHistoryMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		maxBytes int64
		want     bool
	}{
		{0, false},
		{-1, false},
		{1 << 20, true},
		{manager.DefaultHistoryMaxBytes, true},
	} {
		m, err := manager.New(manager.Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, HistoryMaxBytes: tc.maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.History() != nil; got != tc.want {
			t.Errorf("HistoryMaxBytes %d: a record of syncs kept: %v, want %v", tc.maxBytes, got, tc.want)
		}
	}
}
