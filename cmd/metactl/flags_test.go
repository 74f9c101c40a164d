package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/metactl/metactl/internal/cli"
)

// TestFlagHelpIsOneLine: every flag `--help` shows says what it is in one
// line of at most cli.MaxFlagUsage characters; docs/cli.md has the detail.
func TestFlagHelpIsOneLine(t *testing.T) {
	for _, long := range cli.LongFlagUsages(newRootCommand()) {
		t.Error(long)
	}
}

// TestOneNamePerConcept: a concept has one flag name in every subcommand.
// A renamed flag's old name is only a hidden, deprecated alias of its
// current one, on the subcommands that took it (renamedFlags); two flags
// of different names that say the same thing are one concept.
func TestOneNamePerConcept(t *testing.T) {
	root := newRootCommand()
	renamed := map[string]renamedFlag{}
	for _, r := range renamedFlags {
		renamed[r.old] = r
	}
	nameOf := map[string]string{} // usage -> flag name
	cli.VisitFlags(root, func(cmd *cobra.Command, f *pflag.Flag) {
		if r, ok := renamed[f.Name]; ok {
			if !f.Hidden || f.Deprecated == "" || !strings.Contains(f.Deprecated, "--"+r.current) {
				t.Errorf("%s --%s: an old name of --%s shown or not deprecated (hidden %v, deprecated %q)", cmd.CommandPath(), f.Name, r.current, f.Hidden, f.Deprecated)
			}
			return
		}
		if f.Hidden {
			return
		}
		if other, ok := nameOf[f.Usage]; ok && other != f.Name {
			t.Errorf("%s: --%s and --%s say the same (%q): one concept, one name", cmd.CommandPath(), f.Name, other, f.Usage)
		}
		nameOf[f.Usage] = f.Name
	})
	for _, r := range renamedFlags {
		for _, path := range r.commands {
			cmd, _, err := root.Find(strings.Fields(path))
			if err != nil {
				t.Fatal(err)
			}
			old, current := cmd.Flags().Lookup(r.old), cmd.Flags().Lookup(r.current)
			if old == nil || current == nil {
				t.Errorf("metactl %s: --%s %v, --%s %v; want both", path, r.old, old != nil, r.current, current != nil)
			}
		}
	}
}

// TestRenamedFlagsSetTheirOption: each old name sets what its current
// name sets (the opposite for an inverted one), and says which to use.
func TestRenamedFlagsSetTheirOption(t *testing.T) {
	for _, tc := range []struct {
		command, arg, flag, want string
	}{
		{"replay", "--hook=http://127.0.0.1:1", "hook-url", "http://127.0.0.1:1"},
		{"replay", "--hook-for=sync=http://127.0.0.1:1", "hook-url-for", "[sync=http://127.0.0.1:1]"},
		{"replay", "--timeout=3s", "request-timeout", "3s"},
		{"record fetch", "--dir=calls", "record-dir", "calls"},
		{"run", "--apply-force-conflicts=false", "refuse-apply-conflicts", "true"},
		{"run", "--apply-force-conflicts", "refuse-apply-conflicts", "false"},
	} {
		cmd, _, err := newRootCommand().Find(strings.Fields(tc.command))
		if err != nil {
			t.Fatal(err)
		}
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.ParseFlags([]string{tc.arg}); err != nil {
			t.Errorf("metactl %s %s: %v", tc.command, tc.arg, err)
			continue
		}
		if got := cmd.Flags().Lookup(tc.flag).Value.String(); got != tc.want {
			t.Errorf("metactl %s %s: --%s is %s, want %s", tc.command, tc.arg, tc.flag, got, tc.want)
		}
	}
	// The old name reaches manager.Options.
	for arg, want := range map[string]bool{"--apply-force-conflicts=false": true, "--apply-force-conflicts=true": false} {
		f := &runFlags{}
		cmd := runCommand(f)
		for _, r := range renamedFlags {
			if slices.Contains(r.commands, "run") {
				addRenamedFlag(cmd.Flags(), r)
			}
		}
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.ParseFlags([]string{arg}); err != nil {
			t.Fatal(err)
		}
		if got := managerOptions(f, checkedRunFlags{}, nil, nil, nil).RefuseApplyConflicts; got != want {
			t.Errorf("run %s: manager.Options.RefuseApplyConflicts %v, want %v", arg, got, want)
		}
	}
	// Run to the end: the old names reach the options, and a warning
	// names the new ones.
	dir := t.TempDir()
	out, err := execute(t, "replay", dir, "--hook", "http://127.0.0.1:1", "--timeout", "0s")
	if err == nil || !strings.Contains(err.Error(), "--request-timeout 0s") {
		t.Errorf("replay --timeout 0s: %v, want the error of --request-timeout 0s\n%s", err, out)
	}
	for _, want := range []string{"Flag --timeout has been deprecated, use --request-timeout instead", "Flag --hook has been deprecated, use --hook-url instead"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay --hook --timeout: no warning %q:\n%s", want, out)
		}
	}
	out, err = execute(t, "record", "fetch", "cc/x", "--dir", filepath.Join(dir, "calls"), "--endpoint", "http://127.0.0.1:1")
	if err == nil || strings.Contains(err.Error(), "--record-dir is required") || !strings.Contains(out, "use --record-dir instead") {
		t.Errorf("record fetch --dir: %v, want it taken as --record-dir, with a warning\n%s", err, out)
	}
	if out, err := execute(t, "record", "fetch", "cc/x", "--endpoint", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--record-dir is required") {
		t.Errorf("record fetch without --record-dir: %v, want it required\n%s", err, out)
	}
}
