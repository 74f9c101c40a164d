package main

import (
	"os"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/explain"
)

// endpointEnv names the environment variable that, like --endpoint, says
// where metactl serves its metrics address (explain.Path,
// hookrecord.Path).
const endpointEnv = "METACTL_ENDPOINT"

// metactlFlags say where the subcommands that ask the running metactl
// (explain, record fetch) find it.
type metactlFlags struct {
	endpoint                      string
	metactlNamespace, metactlPort string
}

// add adds the flags to fs.
func (m *metactlFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&m.endpoint, "endpoint", "", "metactl's metrics address, http://host:port; default $"+endpointEnv+", metactl dev's, Pod proxy")
	fs.StringVar(&m.metactlNamespace, "metactl-namespace", explain.DefaultNamespace, "namespace of metactl's Pods, for the Pod proxy")
	fs.StringVar(&m.metactlPort, "metactl-port", explain.DefaultPort, "metactl's metrics port number (the API server's Pod proxy takes no port name), for the Pod proxy")
}

// directEndpoint returns the metrics address at which to ask metactl
// directly: --endpoint, else $METACTL_ENDPOINT, else the one metactl dev
// recorded in the kubeconfig's context named context (the current one when
// empty; loader may be nil: no kubeconfig); "" when none, and metactl is
// asked through the Pod proxy. from says where it came from, for messages.
func (m *metactlFlags) directEndpoint(loader clientcmd.ClientConfig, context string) (endpoint, from string) {
	if m.endpoint != "" {
		return m.endpoint, "--endpoint"
	}
	if e := os.Getenv(endpointEnv); e != "" {
		return e, "$" + endpointEnv
	}
	if loader != nil {
		if raw, err := loader.RawConfig(); err == nil {
			if e := explain.RecordedEndpoint(raw, context); e != "" {
				return e, "the kubeconfig (written by metactl dev)"
			}
		}
	}
	return "", ""
}
