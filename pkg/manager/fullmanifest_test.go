package manager_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/manager"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestManifestsWithEveryFieldRun applies, with kubectl, the manifests
// that set every field of metacontroller's CRDs (pkg/apis testdata; the
// API server keeps every field, as the tests there check), and runs them:
// each controller starts (Ready=True, Running), then is deleted cleanly.
func TestManifestsWithEveryFieldRun(t *testing.T) {
	createCRD(t, "ctl.example.com", "things", "Thing")
	runManager(t, manager.Options{Config: env.Config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testdata := filepath.Join(root, "pkg", "apis", "metacontroller", "v1alpha1", "testdata")
	for _, c := range []struct {
		file string
		gvr  schema.GroupVersionResource
	}{
		{"compositecontroller-full.yaml", v1alpha1.CompositeControllerResource},
		{"decoratorcontroller-full.yaml", v1alpha1.DecoratorControllerResource},
	} {
		path := filepath.Join(testdata, c.file)
		// Read here too, so that a changed manifest is not passed over by
		// go test's cache (kubectl reads it in another process).
		if _, err := os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl(ctx, "apply", "--validate=strict", "-f", path); err != nil {
			t.Fatalf("kubectl apply %s: %v: %s", c.file, err, out)
		}
		client := env.Dynamic.Resource(c.gvr)
		t.Cleanup(func() {
			if err := client.Delete(context.Background(), "every-field", metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting %s: %v", c.file, err)
				return
			}
			waitGone(t, client, "every-field", 30*time.Second)
		})
		testenv.Eventually(t, 60*time.Second, c.file+" Ready=True (Running)", func(ctx context.Context) (bool, error) {
			obj, err := client.Get(ctx, "every-field", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			var status v1alpha1.ControllerStatus
			if raw, ok := obj.Object["status"].(map[string]any); ok {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
					return false, err
				}
			}
			ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
			if ready != nil && ready.Status != metav1.ConditionTrue {
				t.Logf("%s: Ready=%s %s: %s", c.file, ready.Status, ready.Reason, ready.Message)
			}
			return status.ObservedGeneration == obj.GetGeneration() && ready != nil &&
				ready.Status == metav1.ConditionTrue && ready.Reason == v1alpha1.ReasonRunning, nil
		})
	}
}
