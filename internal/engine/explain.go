package engine

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/children"
)

// Explainer is what a Controller tells `metactl explain` (internal/explain) beyond
// what the Engine knows; pkg/composite and pkg/decorator implement it. A
// Controller without it explains nothing.
type Explainer interface {
	// Key returns the queue key of obj, an object of res.
	Key(res *Watched, obj metav1.Object) Key
	// Selector describes which objects of res the controller selects, for
	// an object it does not select.
	Selector(res *Watched) string
	// ExplainDependents returns obj's children (attachments) in the
	// cache, with what the kind knows of each, and a rolling update's
	// progress (nil without one). It reads caches only.
	ExplainDependents(obj *unstructured.Unstructured) ([]explain.Dependent, *explain.Rollout)
}

// Explain adds to a what this controller knows of the object a.Object: a
// Controller when it syncs the object's resource and selects the object,
// a NotSelected when it syncs the resource and does not. It reads the
// informer cache, the history Store and the work queue's bookkeeping;
// it never calls a hook or the API server. A controller not started yet
// adds nothing.
func (e *Engine) Explain(a *explain.Answer) {
	x, ok := e.controller.(Explainer)
	if !ok || e.loop == nil {
		return
	}
	req := a.Object
	for _, res := range e.controller.Resources() {
		gvr := res.GroupVersionResource()
		if gvr.Group != req.Group || gvr.Resource != req.Resource || res.Informer == nil {
			continue
		}
		a.Watched = true
		namespace := req.Namespace
		if !res.Namespaced {
			namespace = ""
		}
		obj, found := res.Informer.Get(namespace, req.Name)
		if !found {
			continue
		}
		a.InCache = true
		if res.Selects != nil && !res.Selects(obj) {
			a.NotSelected = append(a.NotSelected, explain.NotSelected{Kind: e.cfg.Kind, Name: e.name, Selector: x.Selector(res)})
			continue
		}
		key := x.Key(res, obj)
		syncs := e.History(key.String())
		since, failures := e.loop.Inspect(key)
		c := explain.Controller{
			Kind: e.cfg.Kind, Name: e.name, Role: explain.RoleDecorated,
			State: explain.NewState(syncs, e.failing.Error(key), failures, since, e.loop.QueuedSince(key)),
			Syncs: syncs,
		}
		if e.cfg.Kind == "CompositeController" {
			c.Role = explain.RoleParent
		}
		if n, perObject, total := e.opts.History.Limits(); n > 0 {
			c.Kept = &explain.Kept{SyncsPerObject: n, BytesPerObject: perObject, Bytes: total}
		}
		c.Dependents, c.Rollout = x.ExplainDependents(obj)
		c.Dependents = append(c.Dependents, goneDependents(syncs, c.Dependents)...)
		if c.Syncs == nil {
			c.Syncs = []*history.Sync{}
		}
		if c.Dependents == nil {
			c.Dependents = []explain.Dependent{}
		}
		a.Controllers = append(a.Controllers, c)
	}
}

// OwnedDependents lists the dependents of the declared resources in the
// cache that owner controls, those for which keep (nil: all) holds, as
// explain shows them.
func OwnedDependents(declared *children.Declared, owner metav1.Object, keep func(metav1.Object) bool) []explain.Dependent {
	var out []explain.Dependent
	for _, res := range declared.Resources {
		if res.Informer == nil {
			continue
		}
		for _, obj := range res.Informer.OwnedByMeta(owner.GetNamespace(), owner.GetUID()) {
			if keep != nil && !keep(obj) {
				continue
			}
			state := explain.DependentPresent
			if obj.GetDeletionTimestamp() != nil {
				state = explain.DependentDeleting
			}
			out = append(out, explain.Dependent{Resource: res.GroupVersionResource().GroupResource().String(),
				Namespace: obj.GetNamespace(), Name: obj.GetName(), State: state})
		}
	}
	return out
}

// goneDependents are the dependents that the newest sync created or
// updated and that the cache no longer holds: deleted since (by someone
// else, or the garbage collector).
func goneDependents(syncs []*history.Sync, present []explain.Dependent) []explain.Dependent {
	if len(syncs) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, d := range present {
		have[trigger.ObjectName(d.Resource, d.Namespace, d.Name)] = true
	}
	var out []explain.Dependent
	seen := map[string]bool{}
	for _, w := range syncs[0].Writes {
		if w.Target != "child" || w.Verb == "delete" || w.Error != "" || have[w.Object] || seen[w.Object] {
			continue
		}
		seen[w.Object] = true
		parts := strings.Split(w.Object, "/")
		d := explain.Dependent{Resource: parts[0], Name: parts[len(parts)-1], State: explain.DependentGone}
		if len(parts) == 3 {
			d.Namespace = parts[1]
		}
		out = append(out, d)
	}
	return out
}

// Error returns the error of the failing last sync of the object queued
// as key; empty when it is not failing.
func (f *Failing) Error(key Key) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs[key]
}
