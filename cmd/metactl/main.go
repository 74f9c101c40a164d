// Command metactl runs CompositeControllers and DecoratorControllers: a
// Kubernetes controller framework whose controllers are written as webhooks.
package main

import (
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
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "metactl",
		Short: "Kubernetes controllers written as webhooks",
		Long: `metactl runs CompositeController and DecoratorController objects
(metacontroller.k8s.io/v1alpha1): it watches their parents and children,
calls their webhooks, and applies what the webhooks ask for.`,
		SilenceUsage: true,
	}
	cli.AddKlogFlags(root)
	root.AddCommand(newVersionCommand(), newRunCommand(), newDevCommand(), newResyncCommand(), newExplainCommand())
	return root
}
