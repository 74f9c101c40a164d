package manifests_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/testenv"
)

// TestHelmTakesOverKustomizeInstall runs charts/metactl/README.md's "Moving
// from the kustomize install" with Helm 4: `kubectl apply -k manifests`,
// then the documented `helm install metactl charts/metactl -n
// metactl-system --take-ownership --server-side=false`, then a plain `helm
// upgrade` that changes the Deployment's args, which must take effect.
// Then, on a fresh kustomize install, it checks why the README gives
// --server-side=false: without it, the install fails on the fields
// kubectl's client-side apply owns. It removes the install after (helm
// uninstall, and kubectl delete of what is left but the Namespace and the
// CRDs, which stay, as the package's other tests expect).
func TestHelmTakesOverKustomizeInstall(t *testing.T) {
	const release = "metactl"
	chart := repo(t, "charts", "metactl")
	helmKube := func(args ...string) (string, error) {
		t.Helper()
		return runHelm(t, append(args, "--kubeconfig", env.KubeconfigPath, "--namespace", namespace)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	kubectl(t, "apply", "-k", repo(t, "manifests"))
	t.Cleanup(func() {
		// The release, failed or not, if any.
		_, _ = helmKube("uninstall", release)
		// What kubectl apply made and Helm did not take: none but the
		// Namespace and the CRDs, which stay.
		for _, o := range render(t) {
			if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			out, err := env.Kubectl(context.Background(), "delete", "--ignore-not-found", "-n", namespace,
				strings.ToLower(o.GetKind())+"/"+o.GetName())
			if err != nil {
				t.Errorf("deleting %s: %v\n%s", objectKey(o), err, out)
			}
		}
	})

	if _, err := helmKube("install", release, chart, "--take-ownership", "--server-side=false"); err != nil {
		t.Fatal(err)
	}
	d, err := env.Kube.AppsV1().Deployments(namespace).Get(ctx, "metactl", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owner := d.Annotations["meta.helm.sh/release-name"]; owner != release {
		t.Errorf("after helm install --take-ownership, Deployment metactl belongs to release %q", owner)
	}

	if _, err := helmKube("upgrade", release, chart, "--set", "run.workers=8"); err != nil {
		t.Fatal(err)
	}
	d, err = env.Kube.AppsV1().Deployments(namespace).Get(ctx, "metactl", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--workers=8") {
		t.Errorf("after helm upgrade --set run.workers=8, the Deployment's args are %q", args)
	}
	// The adopted aggregated ClusterRole is the release's now.
	cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, aggregatedRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owner := cr.Annotations["meta.helm.sh/release-name"]; owner != release {
		t.Errorf("after helm install --take-ownership, %s belongs to release %q", aggregatedRole, owner)
	}

	// Without --server-side=false, Helm 4 applies server-side and
	// conflicts with the fields kubectl's client-side apply set.
	if _, err := helmKube("uninstall", release); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "helm uninstall's Deployment gone", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.AppsV1().Deployments(namespace).Get(ctx, "metactl", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	kubectl(t, "apply", "-k", repo(t, "manifests"))
	_, err = helmKube("install", release, chart, "--take-ownership")
	if err == nil || !strings.Contains(err.Error(), "conflict") || !strings.Contains(err.Error(), "kubectl-client-side-apply") {
		t.Errorf("helm install --take-ownership (Helm 4, server-side) over the kustomize install: %v, want a conflict with kubectl-client-side-apply", err)
	}
}
