package main

import (
	"strconv"
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
