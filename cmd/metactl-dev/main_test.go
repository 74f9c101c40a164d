package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/metactl/metactl/internal/cli"
	"github.com/metactl/metactl/internal/loop"
)

// TestFlagHelpIsOneLine: every flag `metactl dev --help` shows says what
// it is in one line of at most cli.MaxFlagUsage characters; docs/cli.md
// has the detail.
func TestFlagHelpIsOneLine(t *testing.T) {
	cmd := newDevCommand()
	cli.AddKlogFlags(cmd)
	for _, long := range cli.LongFlagUsages(cmd) {
		t.Error(long)
	}
}

// TestWorkersDefaultIsRuns: metactl dev syncs as many parents of a
// controller at once as metactl run does by default (a slow hook must not
// make a new parent wait in dev where it would not in run).
func TestWorkersDefaultIsRuns(t *testing.T) {
	f := newDevCommand().Flags().Lookup("workers")
	if f == nil || f.DefValue != strconv.Itoa(loop.DefaultWorkers) {
		t.Errorf("--workers default %v, want metactl run's %d", f, loop.DefaultWorkers)
	}
}

// TestLeftOut: with an OTEL_* variable set, dev says it exports no traces
// and serves no /metrics; without, it says nothing.
func TestLeftOut(t *testing.T) {
	if got := leftOut([]string{"HOME=/root", "PATH=/bin"}); got != "" {
		t.Errorf("no OTEL_* set: %q, want nothing", got)
	}
	got := leftOut([]string{"OTEL_TRACES_EXPORTER=otlp", "HOME=/root", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"})
	for _, want := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER set", "exports no traces", "serves no /metrics"} {
		if !strings.Contains(got, want) {
			t.Errorf("leftOut = %q, lacks %q", got, want)
		}
	}
}
