package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/plan"
)

// planFlags are the flags of `metactl plan`.
type planFlags struct {
	kubeFlags
	output                       string
	filename                     string
	controllers                  []string
	hookURL, customizeHookURL    string
	requestTimeout, cacheTimeout time.Duration
}

func newPlanCommand() *cobra.Command {
	f := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan (RESOURCE/NAME | -f FILE)",
		Short: "Show what metactl would do to a parent now, writing nothing",
		Long: `plan runs one sync of a parent (or decorated object) as metactl run
would, with the same code, and prints what it would do, writing nothing:
each child (attachment) created, updated, replaced, deleted or unchanged,
with the fields that would change; the labels, annotations, finalizers
and status of the object; the Events; how many hook calls it took and
whether the hook settled. Every write is sent to the API server as a
dry run (dryRun=All), so admission and defaulting are included.

The object is a live one (RESOURCE/NAME, as kubectl names it) or one
read from a file (-f), as a server-side apply of it would leave it (it
need not exist). The controllers are those of the cluster that manage
the object, or --controller's. --hook-url calls the hooks elsewhere, such
as a copy running on this machine (a URL without a path keeps each hook's
own path; a hook called there gets no credentials); a hook given as an
in-cluster Service must be reached that way (kubectl port-forward).

Exit code: 0 no changes, 2 changes, 1 error (the plan could not be made,
or the hook failed or answered invalidly). docs/plan.md has the details.`,
		Example: `  metactl plan helloworlds/your-name
  metactl plan -f parent.yaml --controller controller.yaml --hook-url http://127.0.0.1:8080 -o json`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd.Context(), cmd.OutOrStdout(), f, args)
		},
	}
	fs := cmd.Flags()
	f.kubeFlags.add(fs, "namespace of the object; default the kubeconfig context's namespace")
	fs.StringVarP(&f.filename, "filename", "f", "", "file holding the object (YAML or JSON; - for stdin), planned as applied, whether or not it exists")
	fs.StringArrayVar(&f.controllers, "controller", nil, "file of controllers to plan (repeatable); default those in the cluster managing the object")
	fs.StringVar(&f.hookURL, "hook-url", "", "URL replacing the sync and finalize hooks' (without a path: their own); sends no credentials")
	fs.StringVar(&f.customizeHookURL, "customize-hook-url", "", "URL replacing the customize hook's address; default --hook-url's host with the hook's own path")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fs.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "longest wait for each API request")
	fs.DurationVar(&f.cacheTimeout, "cache-timeout", plan.DefaultCacheTimeout, "longest wait for each controller's caches to fill")
	return cmd
}

func runPlan(ctx context.Context, out io.Writer, f *planFlags, args []string) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	if (f.filename == "") == (len(args) == 0) {
		return errors.New("give either RESOURCE/NAME or -f FILE")
	}
	conn := connection{kubeFlags: f.kubeFlags, command: "plan", timeout: f.requestTimeout}
	var controllers []*unstructured.Unstructured
	for _, file := range f.controllers {
		objs, err := readObjects(file)
		if err != nil {
			return err
		}
		controllers = append(controllers, objs...)
	}
	if f.controllers != nil && len(controllers) == 0 {
		return errors.New("--controller: no object in the files")
	}

	var (
		p      *plan.Planner
		obj    *unstructured.Unstructured
		exists = true
	)
	newPlanner := func(o plan.Options) (*plan.Planner, error) {
		o.Controllers, o.HookURL, o.CustomizeHookURL, o.CacheTimeout = controllers, f.hookURL, f.customizeHookURL, f.cacheTimeout
		return plan.New(o)
	}
	if len(args) > 0 {
		resource, name, err := objectArgs(args)
		if err != nil {
			return err
		}
		o, err := resolveObject(conn, resource, name)
		if err != nil {
			return err
		}
		if p, err = newPlanner(plan.Options{Config: o.cfg}); err != nil {
			return err
		}
		defer p.Close()
		if obj, err = p.Live(ctx, o.mapping.Resource, o.namespace, name); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s not found (to plan an object not yet created, give it with -f): %w", o.mapping.Resource.GroupResource(), name, err)
			}
			return err
		}
	} else {
		objs, err := readObjects(f.filename)
		if err != nil {
			return err
		}
		if len(objs) != 1 {
			return fmt.Errorf("-f %s: want one object, found %d", f.filename, len(objs))
		}
		loader, cfg, err := conn.load()
		if err != nil {
			return err
		}
		if p, err = newPlanner(plan.Options{Config: cfg}); err != nil {
			return err
		}
		defer p.Close()
		ns, _, err := loader.Namespace()
		if err != nil {
			return fmt.Errorf("the kubeconfig's namespace: %w", err)
		}
		if obj, exists, err = p.Given(ctx, objs[0], ns); err != nil {
			return err
		}
	}
	report, err := p.Plan(ctx, obj, exists)
	if err != nil {
		return err
	}
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else if err := plan.WriteText(out, report); err != nil {
		return err
	}
	switch {
	case report.Failed():
		return &ExitError{Code: 1}
	case report.Changed():
		return &ExitError{Code: ExitChanges}
	}
	return nil
}
