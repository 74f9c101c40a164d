// Command metactl runs CompositeControllers and DecoratorControllers: a
// Kubernetes controller framework whose controllers are written as webhooks.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/metactl/metactl/internal/cli"
)

func main() {
	err := newProgram(os.Args[0], os.Args[1:]).Execute()
	if ee, ok := errors.AsType[*ExitError](err); !ok || ee.Err != nil {
		if err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
	}
	os.Exit(exitCode(err))
}

// newProgram is the command tree of the program file argv0 (os.Args[0])
// run with args.
func newProgram(argv0 string, args []string) *cobra.Command {
	root := newRootCommand()
	if name, ok := pluginName(argv0); ok {
		// Run by kubectl as the plugin kubectl-metactl: help, usage,
		// errors and examples say "kubectl metactl", as the user types it.
		setDisplayName(root, name)
	}
	if completesPlugin(argv0) {
		// kubectl completing `kubectl metactl ...`.
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	root.SetArgs(args)
	return root
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "metactl",
		Short: "Kubernetes controllers written as webhooks",
		Long: `metactl runs CompositeController and DecoratorController objects
(metacontroller.k8s.io/v1alpha1): it watches their parents and children,
calls their webhooks, and applies what the webhooks ask for.`,
		SilenceUsage: true,
		// main prints errors, but not those of an ExitError that has
		// nothing to say beyond its exit code.
		SilenceErrors: true,
	}
	cli.AddKlogFlags(root)
	root.AddCommand(newVersionCommand(), newRunCommand(), newDevCommand(), newResyncCommand(), newExplainCommand(),
		newPlanCommand(), newHookCommand(), newRecordCommand(), newReplayCommand(), newUninstallCommand())
	addRenamedFlags(root)
	return root
}
