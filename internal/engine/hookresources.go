package engine

import "k8s.io/apimachinery/pkg/runtime/schema"

// HookResources returns the resources whose objects the controller's hook
// calls carry: those of the objects it syncs (a CompositeController's
// parent resource, a DecoratorController's resources), then its child
// resources (attachments), each once. Related objects, which customize
// rules choose per object, are not among them. metactl lets only whoever
// may list all of them read the controller's recorded calls.
func (e *Engine) HookResources() []schema.GroupVersionResource {
	var resources []schema.GroupVersionResource
	seen := map[schema.GroupVersionResource]bool{}
	add := func(gvr schema.GroupVersionResource) {
		if !seen[gvr] {
			seen[gvr] = true
			resources = append(resources, gvr)
		}
	}
	for _, res := range e.controller.Resources() {
		add(res.GroupVersionResource())
	}
	for _, res := range e.controller.Dependents().Resources {
		add(res.GroupVersionResource())
	}
	return resources
}
