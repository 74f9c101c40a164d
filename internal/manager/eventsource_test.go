//go:build integration

package manager_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestEventSourceComponent runs a manager with the default source
// component and one with metacontroller's: each controller object's
// Started Event names the component asked for, as its source and its
// reporting controller.
func TestEventSourceComponent(t *testing.T) {
	for _, tc := range []struct{ name, option, want string }{
		{"default", "", "metactl"},
		{"metacontroller", "metacontroller", "metacontroller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := runManager(t, manager.Options{Config: env.Config, Workers: 2, EventSourceComponent: tc.option})
			defer stop()
			ctx := context.Background()
			cc := compositeController("event-source-"+tc.name, "http://127.0.0.1:1/sync")
			cc.Object["spec"].(map[string]any)["parentResource"] = map[string]any{"apiVersion": "v1", "resource": "secrets"}
			created, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx, cc, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), cc.GetName(), metav1.DeleteOptions{})
			})
			var started *corev1.Event
			testenv.Eventually(t, 60*time.Second, "a Started Event on "+cc.GetName(), func(ctx context.Context) (bool, error) {
				list, err := events(ctx, created.GetUID())
				if err != nil {
					return false, err
				}
				for i := range list {
					if list[i].Reason == "Started" {
						started = &list[i]
						return true, nil
					}
				}
				return false, nil
			})
			if started.Source.Component != tc.want || started.ReportingController != tc.want {
				t.Errorf("Started Event: source.component %q, reportingController %q; want %q for both", started.Source.Component, started.ReportingController, tc.want)
			}
		})
	}
}
