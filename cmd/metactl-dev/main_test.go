package main

import (
	"testing"

	"github.com/metactl/metactl/internal/cli"
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
