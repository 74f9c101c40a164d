package decorator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
)

// Offline returns the sync of obj, an object of one of the decorated
// resources, as the reconciler makes it, without observing or writing
// anything: the requests it sends (Request) and how it reads (Read) and
// checks (Desired) the answers. `metactl hook test` builds its requests
// and checks the answers with it.
func (c *Controller) Offline(obj *unstructured.Unstructured) (engine.Sync, error) {
	gvk := obj.GroupVersionKind()
	for _, w := range c.watched {
		if w.GroupVersionKind() == gvk {
			return &objectSync{c: c, obj: obj, ref: ownership.ControllerRef(obj, gvk)}, nil
		}
	}
	return nil, fmt.Errorf("%s %s is not one of the decorated resources (spec.resources)", obj.GetAPIVersion(), obj.GetKind())
}
