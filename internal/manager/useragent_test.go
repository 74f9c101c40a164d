//go:build integration

package manager_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/controllertest"
	"github.com/metactl/metactl/internal/manager"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

// TestClientSideFieldManager: whatever User-Agent its Config carries (none,
// as metactl dev's control plane gives it, or metactl run's), the
// manager's client-side writes of children are recorded by the API server
// under the field manager children.ClientSideManager ("metactl"), the one
// that switching to server-side apply hands over.
func TestClientSideFieldManager(t *testing.T) {
	applyWidgetsCRD(t)
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, ua := range []string{"", "metactl/v1.2.3 (run)"} {
		t.Run("user-agent "+ua, func(t *testing.T) {
			config := rest.CopyConfig(env.Config)
			config.UserAgent = ua
			stop := runManager(t, manager.Options{Config: config, Workers: 2, DiscoveryInterval: 500 * time.Millisecond})
			defer stop()
			name := "field-manager"
			if ua != "" {
				name = "field-manager-run"
			}
			hook := newHook(t, name)
			widgetController(t, name, hook.URL)
			ns := env.CreateNamespace(t)
			newWidget(t, ns, name, "w")
			child := controllertest.WaitFor(t, env, configMaps, ns, "w-"+name, "the child of w", func(o *unstructured.Unstructured) bool { return o != nil })
			var managers []string
			for _, e := range child.GetManagedFields() {
				managers = append(managers, e.Manager)
				if e.Operation == metav1.ManagedFieldsOperationUpdate && e.Manager != children.ClientSideManager {
					t.Errorf("the child's fields were written by %q, want %q", e.Manager, children.ClientSideManager)
				}
			}
			if len(managers) == 0 {
				t.Error("the child has no managedFields")
			}
		})
	}
}
