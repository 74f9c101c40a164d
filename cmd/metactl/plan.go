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
	"k8s.io/client-go/rest"

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
	controllers, err := readControllers(f.controllers)
	if err != nil {
		return err
	}
	newPlanner := func(cfg *rest.Config) (*plan.Planner, error) {
		return plan.New(plan.Options{Config: cfg, Controllers: controllers, HookURL: f.hookURL, CustomizeHookURL: f.customizeHookURL, CacheTimeout: f.cacheTimeout})
	}
	var t *planTarget
	if len(args) > 0 {
		t, err = livePlanTarget(ctx, conn, args, newPlanner)
	} else {
		t, err = filePlanTarget(ctx, conn, f.filename, newPlanner)
	}
	if err != nil {
		return err
	}
	defer t.planner.Close()
	report, err := t.planner.Plan(ctx, t.obj, t.exists)
	if err != nil {
		return err
	}
	if err := writePlan(out, f.output, report); err != nil {
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

// readControllers reads the controllers of --controller's files; nil for
// no file, and an error for files that hold none.
func readControllers(files []string) ([]*unstructured.Unstructured, error) {
	var controllers []*unstructured.Unstructured
	for _, file := range files {
		objs, err := readObjects(file)
		if err != nil {
			return nil, err
		}
		controllers = append(controllers, objs...)
	}
	if files != nil && len(controllers) == 0 {
		return nil, errors.New("--controller: no object in the files")
	}
	return controllers, nil
}

// planTarget is the object to plan, and the planner that read it, which
// the caller closes.
type planTarget struct {
	planner *plan.Planner
	obj     *unstructured.Unstructured
	// exists: obj is in the cluster (a live object, or a file's that
	// exists).
	exists bool
}

// livePlanTarget reads the live object args name, with a planner from
// newPlanner for the cluster conn connects to.
func livePlanTarget(ctx context.Context, conn connection, args []string, newPlanner func(*rest.Config) (*plan.Planner, error)) (*planTarget, error) {
	resource, name, err := objectArgs(args)
	if err != nil {
		return nil, err
	}
	o, err := resolveObject(conn, resource, name)
	if err != nil {
		return nil, err
	}
	p, err := newPlanner(o.cfg)
	if err != nil {
		return nil, err
	}
	obj, err := p.Live(ctx, o.mapping.Resource, o.namespace, name)
	if err != nil {
		p.Close()
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s not found (to plan an object not yet created, give it with -f): %w", o.mapping.Resource.GroupResource(), name, err)
		}
		return nil, err
	}
	return &planTarget{planner: p, obj: obj, exists: true}, nil
}

// filePlanTarget reads the object of file as a server-side apply of it
// would leave it, with a planner from newPlanner for the cluster conn
// connects to.
func filePlanTarget(ctx context.Context, conn connection, file string, newPlanner func(*rest.Config) (*plan.Planner, error)) (*planTarget, error) {
	objs, err := readObjects(file)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("-f %s: want one object, found %d", file, len(objs))
	}
	loader, cfg, err := conn.load()
	if err != nil {
		return nil, err
	}
	p, err := newPlanner(cfg)
	if err != nil {
		return nil, err
	}
	t := &planTarget{planner: p}
	ns, _, err := loader.Namespace()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("the kubeconfig's namespace: %w", err)
	}
	if t.obj, t.exists, err = p.Given(ctx, objs[0], ns); err != nil {
		p.Close()
		return nil, err
	}
	return t, nil
}

// writePlan writes report to out in the format output names (text or
// json).
func writePlan(out io.Writer, output string, report *plan.Report) error {
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return plan.WriteText(out, report)
}
