package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// ResyncAnnotation is the annotation `metactl resync` sets, to the time of
// the request: a change of metadata, which every controller watching the
// object sees as a change and syncs at once, whatever backoff the object
// is in.
const ResyncAnnotation = "metactl.io/resync-requested"

func newResyncCommand() *cobra.Command {
	var kube kubeFlags
	cmd := &cobra.Command{
		Use:   "resync RESOURCE/NAME",
		Short: "Make metactl sync a parent (or decorated object) now",
		Long: `resync makes metactl sync an object now instead of at its next retry
(a failing sync is retried with a backoff of up to --max-retry-delay, 2
minutes by default): it sets the annotation ` + ResyncAnnotation + `
on the object to the current time, and the change makes each controller
that watches the object sync it at once. RESOURCE is what kubectl takes:
a plural, singular or short name, or a kind, optionally with its group
(helloworlds, hello, HelloWorld, helloworlds.example.metactl.io). For a
child, the parent that owns it is synced.

It connects as kubectl does: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the in-cluster config.`,
		Example: `  metactl resync helloworlds/your-name
  metactl resync deployments.apps/web -n shop`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return resync(cmd.Context(), cmd, kube, args[0])
		},
	}
	fs := cmd.Flags()
	kube.add(fs, "namespace of the object; default the kubeconfig context's namespace")
	return cmd
}

func resync(ctx context.Context, cmd *cobra.Command, kube kubeFlags, arg string) error {
	resource, name, err := objectArgs([]string{arg})
	if err != nil {
		return err
	}
	o, err := resolveObject(connection{kubeFlags: kube, command: "resync"}, resource, name)
	if err != nil {
		return err
	}
	cfg, mapping, namespace := o.cfg, o.mapping, o.namespace
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = client.Resource(mapping.Resource)
	target := name
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = client.Resource(mapping.Resource).Namespace(namespace)
		target = cache.NewObjectName(namespace, name).String()
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		ResyncAnnotation: time.Now().UTC().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "metactl-resync"}); err != nil {
		return fmt.Errorf("annotating %s %s: %w", mapping.Resource.GroupResource(), target, err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s: resync requested\n", mapping.Resource.GroupResource(), target)
	return err
}

// resolveResource maps what kubectl accepts as a resource (plural,
// singular, short name or kind, with an optional version and group) to a
// served resource.
func resolveResource(mapper meta.RESTMapper, arg string) (*meta.RESTMapping, error) {
	fullySpecified, groupResource := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	var err error
	if fullySpecified != nil {
		gvk, err = mapper.KindFor(*fullySpecified)
	}
	if gvk.Empty() {
		gvk, err = mapper.KindFor(groupResource.WithVersion(""))
	}
	if err != nil {
		return nil, fmt.Errorf("resource %q: %w", arg, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("resource %q: %w", arg, err)
	}
	return mapping, nil
}
