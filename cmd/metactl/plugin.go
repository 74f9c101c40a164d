package main

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// pluginName returns how kubectl's users type the plugin that the program
// file argv0 is, such as "kubectl metactl" for kubectl-metactl (kubectl
// reads a dash in the file name as a space between words and an
// underscore as a dash: kubectl-meta_ctl is "kubectl meta-ctl"), and
// false when argv0 is no kubectl plugin's name.
func pluginName(argv0 string) (string, bool) {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	name, ok := strings.CutPrefix(base, "kubectl-")
	if !ok || name == "" {
		return "", false
	}
	return "kubectl " + strings.ReplaceAll(strings.ReplaceAll(name, "-", " "), "_", "-"), true
}

// completesPlugin reports whether argv0 is the program kubectl (1.26 and
// later) runs to complete a plugin's arguments, kubectl_complete-NAME:
// installed under that name too, metactl answers as cobra's completion
// command (__complete) does for the arguments kubectl passes.
func completesPlugin(argv0 string) bool {
	return strings.HasPrefix(strings.TrimSuffix(filepath.Base(argv0), ".exe"), "kubectl_complete-")
}

// exampleCommand is an example's line that runs metactl: the indentation,
// then "metactl ".
var exampleCommand = regexp.MustCompile(`(?m)^(\s*)metactl `)

// setDisplayName makes root's help, usage and errors, and every
// subcommand's, call the program name (cobra's display name), and the
// examples run it as name: for metactl run by kubectl as the plugin
// kubectl-metactl, "kubectl metactl".
func setDisplayName(root *cobra.Command, name string) {
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[cobra.CommandDisplayNameAnnotation] = name
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Example = exampleCommand.ReplaceAllString(c.Example, "${1}"+name+" ")
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
