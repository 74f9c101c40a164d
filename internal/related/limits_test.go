//go:build integration

package related_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

var (
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// TestRelatedObjectsAreCapped: rules that together select more related
// objects than the limit fail the sync with an error naming the rule that
// went over, the count and the flag; at the limit they do not. An object
// two rules select counts once.
func TestRelatedObjectsAreCapped(t *testing.T) {
	own := env.CreateNamespace(t)
	labels := map[string]any{"related-test": label(t)}
	for _, name := range []string{"a", "b", "c"} {
		createConfigMap(t, own, name, labels)
	}
	createConfigMap(t, own, "d", map[string]any{"unlabelled": "yes"})
	// a, d; then a (again), b, c: 4 objects, 5 selections.
	rules := []map[string]any{
		{"apiVersion": "v1", "resource": "configmaps", "names": []any{"a", "d"}},
		{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": labels}},
	}
	parent := parentIn(own)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFixtureWith(t, 3, nil, v1alpha1.HookVersionV2, rules...)
	_, err := f.resolver.Related(ctx, nil, hookclient.CallOptions{}, own+"/p", parent, true, f.version, nil)
	if err == nil {
		t.Fatal("4 related objects with a limit of 3: no error")

	}
	for _, want := range []string{"relatedResources[1] (configmaps)", "4 related objects", "limit of 3", "--max-related-objects"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	at := newFixtureWith(t, 4, nil, v1alpha1.HookVersionV2, rules...)
	if _, err := at.resolver.Related(ctx, nil, hookclient.CallOptions{}, own+"/p", parent, true, at.version, nil); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// TestUnusedRelatedInformersAreReleased: an informer started for a related
// resource is stopped once no parent's rules use it: when a parent's new
// answer no longer declares it and when the last parent declaring it is
// forgotten; not while another parent still declares it. The namespaces
// informer goes with the last rule that selects namespaces by label.
func TestUnusedRelatedInformersAreReleased(t *testing.T) {
	own := env.CreateNamespace(t)
	v2 := ptr.To(v1alpha1.HookVersionV2)
	f := newFixture(t, v2, v1alpha1.HookVersionV2, map[string]any{"apiVersion": "v1", "resource": "configmaps",
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"related-test": label(t)}}})
	p, q := parentIn(own), parentIn(own)
	q.SetName("q")
	q.SetUID("uid-q")
	f.related(t, p)
	f.related(t, q)
	f.wantInformers(t, "both parents declare configmaps", configMapsGVR, namespacesGVR)

	// p's next generation declares Secrets instead; q still declares
	// ConfigMaps.
	f.setRules(map[string]any{"apiVersion": "v1", "resource": "secrets", "names": []any{"s"}})
	p.SetGeneration(2)
	f.related(t, p)
	f.wantInformers(t, "q still declares configmaps", configMapsGVR, namespacesGVR, secretsGVR)

	f.resolver.Forget(own + "/q")
	f.wantInformers(t, "q forgotten", secretsGVR)

	f.setRules()
	p.SetGeneration(3)
	f.related(t, p)
	f.wantInformers(t, "no rules")
}
