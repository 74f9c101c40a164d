package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// MaxFlagUsage is the longest help string of a flag: one line of
// `--help`. The detail goes to docs/cli.md.
const MaxFlagUsage = 100

// VisitFlags calls fn for every flag of every command of root's tree,
// each command's own and those it inherits, once each.
func VisitFlags(root *cobra.Command, fn func(cmd *cobra.Command, f *pflag.Flag)) {
	seen := map[*pflag.Flag]bool{}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		visit := func(f *pflag.Flag) {
			if !seen[f] {
				seen[f] = true
				fn(cmd, f)
			}
		}
		cmd.Flags().VisitAll(visit)
		cmd.InheritedFlags().VisitAll(visit)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// LongFlagUsages describes each flag that root's tree shows in `--help`
// whose help is more than one line or longer than MaxFlagUsage, or that
// has a backquote: pflag takes a backquoted word as the flag's value
// placeholder (pflag.UnquoteUsage), so that "`metactl replay`" in a
// string flag's help shows "--record-dir metactl replay", and in a bool
// flag's a placeholder where none belongs.
func LongFlagUsages(root *cobra.Command) []string {
	var long []string
	VisitFlags(root, func(cmd *cobra.Command, f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if len(f.Usage) > MaxFlagUsage || strings.Contains(f.Usage, "\n") {
			long = append(long, fmt.Sprintf("%s --%s: help of %d characters (at most %d, one line): %q", cmd.CommandPath(), f.Name, len(f.Usage), MaxFlagUsage, f.Usage))
		}
		if strings.Contains(f.Usage, "`") {
			name, _ := pflag.UnquoteUsage(f)
			long = append(long, fmt.Sprintf("%s --%s: help with a backquote, which --help shows as the value placeholder %q: %q", cmd.CommandPath(), f.Name, name, f.Usage))
		}
	})
	return long
}
