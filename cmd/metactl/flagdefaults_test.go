package main

import (
	"testing"
)

// TestRunFlagDefaults: `metactl run` has the flags and defaults that
// docs/compatibility.md's Flags table promises next to metacontroller's
// (a change of a default must change that table too).
func TestRunFlagDefaults(t *testing.T) {
	root := newProgram("metactl", nil)
	run, _, err := root.Find([]string{"run"})
	if err != nil || run == root {
		t.Fatalf("no run command: %v", err)
	}
	for name, want := range map[string]string{
		"kubeconfig":                  "",
		"context":                     "",
		"discovery-interval":          "30s",
		"cache-resync":                "30m0s",
		"workers":                     "256",
		"client-qps":                  "0",
		"client-burst":                "0",
		"events-qps":                  "0",
		"events-burst":                "0",
		"metrics-addr":                ":9999",
		"health-addr":                 ":9998",
		"pprof-addr":                  "",
		"leader-elect":                "false",
		"leader-elect-lease-name":     "metactl",
		"leader-elect-lease-duration": "15s",
		"leader-elect-renew-deadline": "10s",
		"leader-elect-retry-period":   "2s",
		"log-format":                  "text",
		"apply-strategy":              "client-side",
		"refuse-apply-conflicts":      "false",
		"stop-grace-period":           "10s",
		"event-source-component":      "metactl",
		"synced-condition":            "false",
		"history-max-bytes":           "4194304",
		"explain":                     "true",
		"allow-insecure-credentials":  "false",
		"require-service-account":     "false",
	} {
		f := run.Flags().Lookup(name)
		if f == nil {
			f = run.InheritedFlags().Lookup(name)
		}
		if f == nil {
			t.Errorf("run has no flag --%s", name)
			continue
		}
		if f.DefValue != want {
			t.Errorf("run --%s defaults to %q, want %q", name, f.DefValue, want)
		}
	}
	// metacontroller's names are not metactl's: a misspelt translation
	// must fail, not be ignored.
	for _, name := range []string{"metrics-address", "health-probe-bind-address", "pprof-address", "leader-election", "client-go-qps", "target-label-selector", "zap-log-level"} {
		if run.Flags().Lookup(name) != nil || run.InheritedFlags().Lookup(name) != nil {
			t.Errorf("run takes metacontroller's --%s; the Flags table says it does not", name)
		}
	}
}
