package composite

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
)

// Offline returns the sync of parent as the reconciler makes it, without
// observing or writing anything: the requests it sends (Request) and how
// it reads (Read) and checks (Desired) the answers, with the rules of a
// sync (declared resources, namespaces, names, the parent's selector).
// `metactl hook test` builds its requests and checks the answers with it.
// The parent needs what a sync needs: a spec.selector, or a UID with
// generateSelector. With rolling child resources the reconciler calls the
// hook once per revision; Offline's sync is that of a parent with one
// revision, whose request holds all its children.
func (c *Controller) Offline(parent *unstructured.Unstructured) (engine.Sync, error) {
	selector, err := c.childSelector(parent)
	if err != nil {
		return nil, err
	}
	return &parentSync{c: c, parent: parent, selector: selector}, nil
}
