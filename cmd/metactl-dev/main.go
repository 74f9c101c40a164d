// Command metactl-dev runs a local one-node cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and kwok simulating the node)
// with metactl in it, and optionally one of the examples: what `metactl dev` and `make demo` run. It is a binary of its
// own so that metactl's production binary does not carry the control-plane
// launcher.
package main

import (
	"os"

	"github.com/metactl/metactl/internal/cli"
	"github.com/metactl/metactl/internal/controlplane"
)

func main() {
	// First: this process may be a stand-in that becomes etcd or
	// kube-apiserver (see controlplane.Options.TieToThisProcess).
	controlplane.RunStandIn()
	cmd := newDevCommand()
	cli.AddKlogFlags(cmd)
	cli.SetCommandName(cmd, "metactl dev")
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
