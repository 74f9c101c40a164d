package main

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// renamedFlag is a flag's old name, kept working as a hidden, deprecated
// alias of its current name (docs/cli.md, "Renamed flags").
type renamedFlag struct {
	old, current string
	// commands are the subcommands (their path below metactl) that took
	// the old name.
	commands []string
	// inverted: the old flag said the opposite (its true is the current
	// flag's false).
	inverted bool
}

// renamedFlags are every renamed flag, whichever subcommands take it: one
// name per concept. TestOneNamePerConcept refuses a visible flag of any
// subcommand under an old name.
var renamedFlags = []renamedFlag{
	{old: "hook", current: "hook-url", commands: []string{"replay"}},
	{old: "hook-for", current: "hook-url-for", commands: []string{"replay"}},
	{old: "timeout", current: "request-timeout", commands: []string{"replay"}},
	{old: "dir", current: "record-dir", commands: []string{"record fetch"}},
	{old: "apply-force-conflicts", current: "refuse-apply-conflicts", inverted: true, commands: []string{"run"}},
}

// addRenamedFlags adds to each command of root's tree the old names of
// its renamed flags (renamedFlags): the same value (inverted for an
// inverted one), hidden from help, with a warning naming the current flag
// when used.
func addRenamedFlags(root *cobra.Command) {
	for _, r := range renamedFlags {
		for _, path := range r.commands {
			cmd, _, err := root.Find(strings.Fields(path))
			if err != nil || cmd == root {
				panic("renamedFlags: no subcommand " + path)
			}
			addRenamedFlag(cmd.Flags(), r)
		}
	}
}

// addRenamedFlag adds r's old name to fs, which has its current one.
func addRenamedFlag(fs *pflag.FlagSet, r renamedFlag) {
	current := fs.Lookup(r.current)
	if current == nil {
		panic("renamedFlags: no flag --" + r.current)
	}
	old := &pflag.Flag{Name: r.old, Usage: "deprecated: use --" + r.current, Value: current.Value, DefValue: current.DefValue, NoOptDefVal: current.NoOptDefVal}
	if r.inverted {
		inv := invertedBool{current.Value}
		old.Value, old.DefValue = inv, inv.String()
	}
	fs.AddFlag(old)
	// MarkDeprecated hides it; cobra prints "Flag --OLD has been
	// deprecated, use --CURRENT instead" when it is given.
	_ = fs.MarkDeprecated(r.old, deprecation(r))
}

// deprecation is the warning printed when r's old name is used.
func deprecation(r renamedFlag) string {
	if r.inverted {
		return "use --" + r.current + " instead (with the opposite value)"
	}
	return "use --" + r.current + " instead"
}

// invertedBool is a bool flag's value seen from a flag that says the
// opposite.
type invertedBool struct{ pflag.Value }

func (v invertedBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	return v.Value.Set(strconv.FormatBool(!b))
}

func (v invertedBool) String() string {
	b, _ := strconv.ParseBool(v.Value.String())
	return strconv.FormatBool(!b)
}
