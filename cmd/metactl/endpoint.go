package main

import (
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/debugauth"
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

// debugClient is the HTTP client that asks metactl's debug endpoints
// directly (--endpoint, $METACTL_ENDPOINT, metactl dev's address): it sends
// cfg's credentials as client-go would (a bearer token, also from an exec
// plugin), as the guard of metactl run (--debug-auth) asks; nil cfg sends
// none (metactl dev's loopback endpoint asks for none).
func debugClient(cfg *rest.Config, timeout time.Duration) (*http.Client, error) {
	if cfg == nil {
		return &http.Client{Timeout: timeout}, nil
	}
	rt, err := rest.HTTPWrappersForConfig(cfg, http.DefaultTransport)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: timeout, Transport: rt}, nil
}

// proxyConfig is a copy of cfg whose requests carry its bearer token in
// debugauth.TokenHeader too, so that it reaches metactl through the API
// server's Pod proxy, which consumes the Authorization header.
func proxyConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(debugauth.ForwardToken)
	return cfg
}
