package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/explain"
)

// explainFlags are the flags of `metactl explain`.
type explainFlags struct {
	kubeFlags
	output string
	metactlFlags
	requestTimeout time.Duration
}

func newExplainCommand() *cobra.Command {
	f := &explainFlags{}
	cmd := &cobra.Command{
		Use:   "explain RESOURCE/NAME",
		Short: "Say why metactl did (or did not) call a parent's hook, and what came of it",
		Long: `explain asks metactl about one parent (or decorated object): which
controller manages it, its last syncs (why each ran, the hook calls, the
writes, how it ended), its backoff and next attempt, and its children
(attachments). RESOURCE is what kubectl takes: a plural, singular or
short name, or a kind, optionally with its group (helloworlds, HelloWorld,
helloworlds.example.metactl.io).

metactl is asked at --endpoint (or $` + endpointEnv + `): its metrics
address, such as http://127.0.0.1:9999; else at the address that
"metactl dev" records in the kubeconfig's context; else through the API
server's Pod proxy: each Running metactl Pod in --metactl-namespace is
asked on --metactl-port, the Ready ones first, and the leader answers (this
needs list on pods and get on pods/proxy in that namespace, and read
access to the object). It connects as kubectl does: --kubeconfig, else
$KUBECONFIG, else ~/.kube/config, else the in-cluster config.

Installed as kubectl-metactl on $PATH, the same binary runs as
"kubectl metactl explain ...".`,
		Example: `  metactl explain helloworlds/your-name
  kubectl metactl explain helloworld your-name -n default -o yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd.Context(), cmd.OutOrStdout(), cmd.Root().DisplayName(), f, args)
		},
	}
	fs := cmd.Flags()
	f.kubeFlags.add(fs, "namespace of the object; default the kubeconfig context's namespace")
	fs.StringVarP(&f.output, "output", "o", "", "output format: empty for people, json or yaml for the answer as metactl sends it")
	f.metactlFlags.add(fs)
	fs.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "longest wait for each answer")
	return cmd
}

// runExplain explains the object args name; self is how the user runs
// metactl ("metactl", or "kubectl metactl" for the plugin), for the
// command it suggests.
func runExplain(ctx context.Context, out io.Writer, self string, f *explainFlags, args []string) error {
	if f.output != "" && f.output != "json" && f.output != "yaml" {
		return fmt.Errorf("--output %q: want json or yaml (or nothing, for people)", f.output)
	}
	resource, name, err := objectArgs(args)
	if err != nil {
		return err
	}
	o, err := resolveObject(connection{kubeFlags: f.kubeFlags, command: "explain", timeout: f.requestTimeout}, resource, name)
	if err != nil {
		return err
	}
	loader, cfg, mapping := o.loader, o.cfg, o.mapping
	req := explain.Request{Group: mapping.Resource.Group, Version: mapping.Resource.Version, Resource: mapping.Resource.Resource, Namespace: o.namespace, Name: name}
	// The object must exist: metactl's answer comes from its caches,
	// which cannot tell a typo from an object not seen yet.
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ri := client.Resource(mapping.Resource).Namespace(req.Namespace)
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			where := ""
			if req.Namespace != "" {
				where = " (namespace from -n or the kubeconfig's context)"
			}
			return fmt.Errorf("%s not found: check the name and the namespace%s", req, where)
		}
		return fmt.Errorf("reading %s: %w", req, err)
	}

	answer, err := askMetactl(ctx, f, loader, cfg, req)
	if err != nil {
		return err
	}
	if !answer.Process.Leading {
		return fmt.Errorf("%w: metactl %s stands by for the leader Lease, or another replica holds the object's bucket (--shard-buckets), and knows no controller of it; ask without --endpoint, through the Pod proxy, and the replica that works on it answers", explain.ErrNotLeading, answer.Process.Name)
	}
	switch f.output {
	case "json":
		data, err := json.MarshalIndent(answer, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", data)
		return err
	case "yaml":
		data, err := yaml.Marshal(answer)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	if err := explain.Print(out, answer, time.Now()); err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && len(answer.Controllers) == 0 {
		// Asked about a child, most likely: its parent is what a
		// controller syncs.
		target := strings.ToLower(ref.Kind)
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group != "" {
			target += "." + gv.Group
		}
		flags := ""
		if req.Namespace != "" {
			flags = " -n " + req.Namespace
		}
		_, err = fmt.Fprintf(out, "Owner:        %s %s controls it: try %s explain %s/%s%s\n", ref.Kind, ref.Name, self, target, ref.Name, flags)
		return err
	}
	return nil
}

// askMetactl asks metactl directly, at --endpoint, $METACTL_ENDPOINT or
// the endpoint metactl dev recorded in the kubeconfig, else through the
// Pod proxy.
//
// Either way it sends cfg's bearer token, which metactl run's guard of
// its debug endpoints reviews (--debug-auth).
func askMetactl(ctx context.Context, f *explainFlags, loader clientcmd.ClientConfig, cfg *rest.Config, req explain.Request) (*explain.Answer, error) {
	if endpoint, from := f.directEndpoint(loader, f.context); endpoint != "" {
		client, err := debugClient(cfg, cfg.Timeout)
		if err != nil {
			return nil, err
		}
		a, err := explain.Fetch(ctx, client, endpoint, req)
		if err != nil {
			return nil, fmt.Errorf("%w; check that metactl runs and serves its metrics address there (endpoint from %s), and that it does not run with --explain=false", err, from)
		}
		return a, nil
	}
	core, err := corev1client.NewForConfig(proxyConfig(cfg))
	if err != nil {
		return nil, err
	}
	a, err := explain.FetchThroughPods(ctx, core, f.metactlNamespace, explain.PodSelector, f.metactlPort, req)
	if err != nil && !errors.Is(err, explain.ErrNotLeading) {
		err = fmt.Errorf("%w; or give metactl's metrics address with --endpoint", err)
	}
	return a, err
}
