//go:build integration

package composite_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/composite"
)

// TestTooManyRelatedObjectsIsASyncError: when the customize hook's rules
// select more related objects than the controller's limit, the sync fails
// with a SyncError Event naming the rule, the count and the flag, and the
// sync hook is not called.
func TestTooManyRelatedObjectsIsASyncError(t *testing.T) {
	ns := env.CreateNamespace(t)
	h := newRelatedHook(t, func(parent *unstructured.Unstructured) any {
		return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"feeds": parent.GetName()}}}}}
	})
	for _, name := range []string{"feed-1", "feed-2", "feed-3"} {
		createValueConfigMap(t, ns, name, "x", map[string]any{"feeds": "p1"})
	}
	startController(t, relatedController(t, h, thingsGVR, "v1"), func(o *composite.Options) { o.MaxRelatedObjects = 2 })
	newThing(t, thingsGVR, ns, "p1", nil)
	waitForEvent(t, ns, "p1", "SyncError", "relatedResources[0] (configmaps): the rules select 3 related objects up to this one, more than the limit of 2 per parent (--max-related-objects)")
	if n := h.syncsOf("p1"); n != 0 {
		t.Errorf("the sync hook was called %d times with too many related objects", n)
	}
}
