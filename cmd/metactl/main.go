// Command metactl runs CompositeControllers and DecoratorControllers: a
// Kubernetes controller framework whose controllers are written as webhooks.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metactl/metactl/internal/cli"
)

func main() {
	root := newRootCommand()
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		// Run by kubectl as the plugin kubectl-metactl: help and usage
		// say "kubectl metactl", as the user typed it.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl metactl"}
	}
	err := root.Execute()
	if ee, ok := errors.AsType[*ExitError](err); !ok || ee.Err != nil {
		if err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
	}
	os.Exit(exitCode(err))
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
		newPlanCommand(), newHookCommand(), newRecordCommand(), newReplayCommand())
	return root
}
