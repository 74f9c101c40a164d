// Package cli holds the command-line plumbing that metactl's binaries
// share: klog's flags with --log-level and --log-format, and the name a
// command shows in its help. Only main
// packages import it; every other package takes its settings as Options.
package cli
