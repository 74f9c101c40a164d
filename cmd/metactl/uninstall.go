package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
)

func newUninstallCommand() *cobra.Command {
	var kube kubeFlags
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what metactl leaves on controller objects, after metactl is stopped",
		Long: `uninstall removes the finalizer ` + manager.CleanupFinalizer + ` from every
CompositeController and DecoratorController. metactl puts it on each
controller object that has a finalize hook, so that deleting the object
waits until metactl has taken the controller's finalizer off its parents.
Once metactl no longer runs (helm uninstall, its Deployment scaled to 0,
or metacontroller in its place), nothing would remove it, and deleting
such a controller object would hang.

Run it after stopping metactl: a running metactl puts the finalizer back.
It changes nothing else: parents keep the controller's own finalizer,
which metacontroller uses under the same name. Each write is a merge
patch of metadata.finalizers with the object's resourceVersion as a
precondition, retried on a conflict.

It connects as kubectl does: --kubeconfig, else $KUBECONFIG, else
~/.kube/config, else the in-cluster config.`,
		Example: `  helm uninstall metactl -n metactl-system
  metactl uninstall`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, cfg, err := kube.load("uninstall")
			if err != nil {
				return err
			}
			client, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return uninstall(cmd.Context(), cmd, client, dryRun)
		},
	}
	fs := cmd.Flags()
	kube.add(fs, "")
	fs.BoolVar(&dryRun, "dry-run", false, "print the controller objects that carry the finalizer, change nothing")
	return cmd
}

// uninstall removes manager.CleanupFinalizer from every controller object,
// or with dryRun only names those that carry it.
func uninstall(ctx context.Context, cmd *cobra.Command, client dynamic.Interface, dryRun bool) error {
	var errs []error
	for _, gvr := range []schema.GroupVersionResource{v1alpha1.CompositeControllerResource, v1alpha1.DecoratorControllerResource} {
		ri := client.Resource(gvr)
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err))
			continue
		}
		for _, item := range list.Items {
			if !finalizer.Has(&item, manager.CleanupFinalizer) {
				continue
			}
			what := gvr.GroupResource().String() + "/" + item.GetName()
			if dryRun {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: carries %s\n", what, manager.CleanupFinalizer)
				continue
			}
			obj := &item
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				_, err := finalizer.Remove(ctx, ri, obj, manager.CleanupFinalizer)
				if !apierrors.IsConflict(err) {
					return err
				}
				fresh, getErr := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
				if getErr != nil {
					return getErr
				}
				obj = fresh
				return err
			})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("removing %s from %s: %w", manager.CleanupFinalizer, what, err))
				continue
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: removed %s\n", what, manager.CleanupFinalizer)
		}
	}
	return errors.Join(errs...)
}
