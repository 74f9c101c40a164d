package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// cleanupFinalizer is the finalizer metactl puts on a controller object
// with a finalize hook (manager.CleanupFinalizer).
const cleanupFinalizer = "metactl.io/cleanup"

// TestUninstallLetsControllerObjectsGo: a CompositeController with a
// finalize hook carries metactl.io/cleanup while metactl runs. Once metactl
// is stopped, `metactl uninstall --dry-run` names it and changes nothing,
// `metactl uninstall` takes the finalizer off, and deleting the
// CompositeController then completes, as it would not without the
// command (nothing else removes the finalizer).
func TestUninstallLetsControllerObjectsGo(t *testing.T) {
	metactl := testenv.BuildMetactl(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"children": [], "finalized": true}`))
	}))
	t.Cleanup(hook.Close)
	deleteOnCleanup(t, applyExample(t, repo(t, "examples", "python", "hello-world", "crd.yaml"), ""))
	name := "uninstall-" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()%1e6))
	manifest := writeManifests(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  generateSelector: true
  parentResource:
    apiVersion: example.metactl.io/v1
    resource: helloworlds
    labelSelector:
      matchLabels:
        test: %s
  hooks:
    sync:
      webhook:
        url: %s/sync
    finalize:
      webhook:
        url: %s/finalize
`, name, name, hook.URL, hook.URL))
	p := testenv.StartProcess(t, metactl, "run", "--kubeconfig", env.KubeconfigPath,
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0", "--workers", "2")
	kubectl(t, "apply", "-f", manifest)
	deleteOnCleanup(t, manifest)
	ccs := v1alpha1.CompositeControllerResource
	waitFor(t, settle, ccs, "", name, "finalizer "+cleanupFinalizer, func(o *unstructured.Unstructured) bool {
		return o != nil && slices.Contains(o.GetFinalizers(), cleanupFinalizer)
	})
	p.Stop(t, syscall.SIGTERM, 30*time.Second)

	out, err := exec.Command(metactl, "uninstall", "--dry-run", "--kubeconfig", env.KubeconfigPath).CombinedOutput()
	if err != nil {
		t.Fatalf("metactl uninstall --dry-run: %v\n%s", err, out)
	}
	if want := "compositecontrollers.metacontroller.k8s.io/" + name + ": carries " + cleanupFinalizer; !strings.Contains(string(out), want) {
		t.Errorf("metactl uninstall --dry-run printed\n%s\nwant a line %q", out, want)
	}
	if cc := get(t, ccs, "", name); !slices.Contains(cc.GetFinalizers(), cleanupFinalizer) {
		t.Fatalf("--dry-run removed the finalizer: %v", cc.GetFinalizers())
	}

	// Deleting it now would hang: the finalizer holds it.
	if err := env.Dynamic.Resource(ccs).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if cc := get(t, ccs, "", name); cc == nil || cc.GetDeletionTimestamp() == nil {
		t.Fatalf("the CompositeController is not held by its finalizer: %v", cc)
	}
	out, err = exec.Command(metactl, "uninstall", "--kubeconfig", env.KubeconfigPath).CombinedOutput()
	if err != nil {
		t.Fatalf("metactl uninstall: %v\n%s", err, out)
	}
	if want := "compositecontrollers.metacontroller.k8s.io/" + name + ": removed " + cleanupFinalizer; !strings.Contains(string(out), want) {
		t.Errorf("metactl uninstall printed\n%s\nwant a line %q", out, want)
	}
	waitGone(t, settle, ccs, "", name)
}
