package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's flags for reaching a cluster, which every
// subcommand that talks to one takes: --kubeconfig, --context and, for a
// subcommand about a namespaced object, -n/--namespace. kubectl passes a
// plugin the arguments after its name and the environment ($KUBECONFIG),
// not its own flags: `kubectl metactl explain x/y -n ns --context c` reads
// them here.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

// add adds --kubeconfig and --context to fs, and -n/--namespace, which
// namespaceUsage describes, unless namespaceUsage is empty.
func (k *kubeFlags) add(fs *pflag.FlagSet, namespaceUsage string) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "path to a kubeconfig; default $KUBECONFIG, else ~/.kube/config, else the in-cluster config")
	fs.StringVar(&k.context, "context", "", "kubeconfig context; default the current one")
	if namespaceUsage != "" {
		fs.StringVarP(&k.namespace, "namespace", "n", "", namespaceUsage)
	}
}

// explicit reports whether --kubeconfig or --context names a cluster.
func (k kubeFlags) explicit() bool { return k.kubeconfig != "" || k.context != "" }

// clientConfig loads the client configuration as kubectl does:
// --kubeconfig, else $KUBECONFIG (a list of files, merged), else
// ~/.kube/config, else the in-cluster config; --context picks the context
// (default the current one), -n overrides its namespace.
func (k kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	overrides.Context.Namespace = k.namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// errNoKubeconfig is wrapped in configOf's error (so in load's) when it
// found no kubeconfig and metactl runs in no cluster.
var errNoKubeconfig = errors.New("no kubeconfig")

// load returns clientConfig and the client configuration from it
// (configOf).
func (k kubeFlags) load(command string) (clientcmd.ClientConfig, *rest.Config, error) {
	loader := k.clientConfig()
	cfg, err := configOf(loader, command)
	if err != nil {
		return nil, nil, err
	}
	return loader, cfg, nil
}

// configOf is loader's client configuration, whose User-Agent names
// metactl's version and the subcommand command ("" for run), with an
// error that says where it looked when it found none (errNoKubeconfig).
func configOf(loader clientcmd.ClientConfig, command string) (*rest.Config, error) {
	cfg, err := loader.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("%w (--kubeconfig, $KUBECONFIG, %s) and not in a cluster: %w", errNoKubeconfig, clientcmd.RecommendedHomeFile, err)
		}
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.UserAgent = "metactl/" + buildVersion().version
	if command != "" {
		cfg.UserAgent += " (" + command + ")"
	}
	return cfg, nil
}
