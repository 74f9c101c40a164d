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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"

	"github.com/metactl/metactl/internal/hooktest"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	dyndiscovery "github.com/metactl/metactl/pkg/dynamic/discovery"
)

// hookTestFlags are the flags of `metactl hook test`.
type hookTestFlags struct {
	controller, parent, hookURL, customizeHookURL string
	crds                                          []string
	kubeFlags
	offline bool
	output  string
}

func newHookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Tools for hook authors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newHookTestCommand())
	return cmd
}

func newHookTestCommand() *cobra.Command {
	f := &hookTestFlags{}
	cmd := &cobra.Command{
		Use:   "test --controller controller.yaml [--hook-url URL]",
		Short: "Send a hook the protocol's edge cases and report what it gets wrong",
		Long: `test sends the hooks of a CompositeController or DecoratorController a set
of valid requests, built as metactl's reconciler builds them (no
children; its own children handed back until it asks for no change; a
child being deleted; related objects; finalizing with and without
children; each request twice), and checks every answer as the reconciler
does. It prints one line per finding with how to fix it.

The hooks are called at their webhook's url, or at --hook-url: a URL
with a path replaces the sync and finalize hooks' address; one without
(http://127.0.0.1:8080) keeps each hook's own path. A hook named by an
in-cluster service needs --hook-url.

The controller's resources are resolved through the cluster's discovery
when a kubeconfig is found and the cluster answers (--kubeconfig, else
$KUBECONFIG, else ~/.kube/config); else offline, from --crd files, a
table of Kubernetes' built-in resources and the sample parent's kind.

Exit status: 0 no error found (warnings allowed), 2 errors found, 1 the
test could not run (bad flags or files, an invalid controller, a cluster
named by --kubeconfig or --context that does not answer, a hook that no
request could reach). docs/hook-test.md lists the requests and checks.`,
		Example: `  python3 examples/python/hello-world/hook.py --port 8080 &
  metactl hook test --controller examples/python/hello-world/controller.yaml \
    --parent examples/python/hello-world/sample.yaml --hook-url http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHookTest(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.controller, "controller", "", "file holding the CompositeController or DecoratorController (YAML or JSON; required)")
	fs.StringVar(&f.parent, "parent", "", "file holding a sample parent; default a minimal object of the parent resource")
	fs.StringVar(&f.hookURL, "hook-url", "", "address of the sync and finalize hooks instead of their webhook's (without a path: their own)")
	fs.StringVar(&f.customizeHookURL, "customize-hook-url", "", "address of the customize hook; default --hook-url's host with the hook's own path")
	fs.StringArrayVar(&f.crds, "crd", nil, "file of CustomResourceDefinitions, to resolve resources without a cluster (repeatable)")
	f.kubeFlags.add(fs, "")
	fs.BoolVar(&f.offline, "offline", false, "do not ask a cluster: resolve resources from --crd files and built-in ones")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("controller")
	return cmd
}

func runHookTest(ctx context.Context, out, errOut io.Writer, f *hookTestFlags) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	controller, crds, err := readHookTestFile(f.controller, "CompositeController", "DecoratorController")
	if err != nil {
		return err
	}
	if len(controller) != 1 {
		return fmt.Errorf("%s: want one CompositeController or DecoratorController, found %d", f.controller, len(controller))
	}
	var parent *unstructured.Unstructured
	if f.parent != "" {
		objs, more, err := readHookTestFile(f.parent, "")
		if err != nil {
			return err
		}
		crds = append(crds, more...)
		if parent = sampleParent(controller[0], objs); parent == nil {
			return fmt.Errorf("%s: no object", f.parent)
		}
	}
	for _, file := range f.crds {
		_, more, err := readHookTestFile(file, "-")
		if err != nil {
			return err
		}
		crds = append(crds, more...)
	}
	opts := hooktest.Options{Controller: controller[0], Parent: parent, HookURL: f.hookURL, CustomizeHookURL: f.customizeHookURL}
	if err := hookTestResources(ctx, f, crds, &opts); err != nil {
		return err
	}
	report, err := hooktest.Run(ctx, opts)
	if err != nil {
		return err
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else if err := report.WriteText(out); err != nil {
		return err
	}
	if report.Errors > 0 {
		return &ExitError{Code: ExitChanges}
	}
	return nil
}

// hookTestResources sets opts.Resources: the cluster's discovery when a
// kubeconfig is found and the cluster answers, else offline.
func hookTestResources(ctx context.Context, f *hookTestFlags, crds []*apiextensionsv1.CustomResourceDefinition, opts *hooktest.Options) error {
	offline := func(why string) {
		var parentAPIVersion, parentResource string
		cc := opts.Controller
		parentAPIVersion, _, _ = unstructured.NestedString(cc.Object, "spec", "parentResource", "apiVersion")
		parentResource, _, _ = unstructured.NestedString(cc.Object, "spec", "parentResource", "resource")
		if cc.GetKind() == "DecoratorController" {
			if rules, _, _ := unstructured.NestedSlice(cc.Object, "spec", "resources"); len(rules) > 0 {
				if rule, ok := rules[0].(map[string]any); ok {
					parentAPIVersion, _ = rule["apiVersion"].(string)
					parentResource, _ = rule["resource"].(string)
				}
			}
		}
		resources, notes := hooktest.OfflineResources(crds, opts.Parent, parentAPIVersion, parentResource)
		opts.Resources, opts.Offline = resources, true
		opts.Notes = append([]string{"resources resolved offline: " + why}, notes...)
	}
	if f.offline {
		offline("--offline")
		return nil
	}
	explicit := f.explicit()
	_, cfg, err := f.load("hook test")
	if err != nil {
		if explicit || !errors.Is(err, errNoKubeconfig) {
			return err
		}
		offline("no kubeconfig")
		return nil
	}
	cfg.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	resources := dyndiscovery.NewResourceMap(dc, dyndiscovery.Options{})
	if err := resources.Refresh(ctx); err != nil {
		if explicit {
			return fmt.Errorf("the cluster of the kubeconfig does not answer (use --offline to test without one): %w", err)
		}
		offline(fmt.Sprintf("the cluster of the kubeconfig does not answer (%v)", err))
		return nil
	}
	opts.Resources = resources
	return nil
}

// readHookTestFile reads the objects of file (readObjects): those of the
// kinds given (any kind for "", none for "-"), and the
// CustomResourceDefinitions among them.
func readHookTestFile(file string, kinds ...string) ([]*unstructured.Unstructured, []*apiextensionsv1.CustomResourceDefinition, error) {
	all, err := readObjects(file)
	if err != nil {
		return nil, nil, err
	}
	var objs []*unstructured.Unstructured
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, u := range all {
		if u.GetKind() == "CustomResourceDefinition" {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
				return nil, nil, fmt.Errorf("%s: CustomResourceDefinition %s: %w", file, u.GetName(), err)
			}
			crds = append(crds, crd)
			continue
		}
		for _, k := range kinds {
			if k == "" || (k == u.GetKind() && strings.HasPrefix(u.GetAPIVersion(), v1alpha1.GroupName+"/")) {
				objs = append(objs, u)
				break
			}
		}
	}
	return objs, crds, nil
}

// sampleParent returns the object of objs (a sample file's) in the
// apiVersion of the controller's parent resource (or of one of its
// decorated resources), else the first one; nil for none.
func sampleParent(controller *unstructured.Unstructured, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	want := map[string]bool{}
	if v, _, _ := unstructured.NestedString(controller.Object, "spec", "parentResource", "apiVersion"); v != "" {
		want[v] = true
	}
	rules, _, _ := unstructured.NestedSlice(controller.Object, "spec", "resources")
	for _, r := range rules {
		if rule, ok := r.(map[string]any); ok {
			if v, ok := rule["apiVersion"].(string); ok {
				want[v] = true
			}
		}
	}
	for _, obj := range objs {
		if want[obj.GetAPIVersion()] {
			return obj
		}
	}
	if len(objs) > 0 {
		return objs[0]
	}
	return nil
}
