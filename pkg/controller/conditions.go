package controller

import (
	"context"
	"sync"
	"time"

	"github.com/metactl/metactl/pkg/dynamic/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// managedConditions completes the conditions of the statuses a hook
// answers (status.FillConditions: lastTransitionTime and
// observedGeneration), for one Engine, and remembers the resources whose
// status schema drops those fields, so that it stops filling them there:
// a status the server prunes never equals the one metactl wants, and
// filling it would write the status again on every sync. Safe for
// concurrent use.
type managedConditions struct {
	mu     sync.Mutex
	pruned map[schema.GroupResource]prunedFields
}

// prunedFields are the condition fields a resource's status schema drops.
type prunedFields struct {
	// lastTransitionTime dropped: nothing is filled (FillConditions fills
	// it whenever it fills anything).
	lastTransitionTime bool
	// observedGeneration dropped: lastTransitionTime alone is filled.
	observedGeneration bool
}

func (m *managedConditions) get(gr schema.GroupResource) prunedFields {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pruned[gr]
}

// fillConditions completes the conditions of want, the status an answer
// asks for, against the status of given, the object as the hook was given
// it in this round (see status.FillConditions), with the generation of t's
// object. It is called before the rounds compare want with what the hook
// was given, so that the times metactl keeps are no change and a hook
// that answers the same conditions reaches a fixed point. A nil want (the
// status left alone) and a status without a list of conditions are left
// as they are.
func (e *Engine) fillConditions(t *Target, given *unstructured.Unstructured, want map[string]any) {
	if want == nil {
		return
	}
	pruned := e.conditions.get(t.Resource.GroupVersionResource().GroupResource())
	if pruned.lastTransitionTime {
		return
	}
	generation := t.Object.GetGeneration()
	if pruned.observedGeneration {
		generation = 0
	}
	have, _ := given.Object["status"].(map[string]any)
	status.FillConditions(have, want, generation, time.Now())
}

// checkPruned compares the conditions of want, the status just written,
// with those of written, the object the write returned: when a condition
// that has lastTransitionTime (observedGeneration) in want lacks it as
// written, the resource's status schema prunes it, and metactl stops
// filling it for this resource, logging it once.
func (e *Engine) checkPruned(ctx context.Context, t *Target, want map[string]any, written metav1.Object) {
	gr := t.Resource.GroupVersionResource().GroupResource()
	before := e.conditions.get(gr)
	if before.lastTransitionTime {
		return
	}
	wantList, ok := want["conditions"].([]any)
	if !ok || len(wantList) == 0 {
		return
	}
	decoder, ok := written.(interface {
		Unstructured() (*unstructured.Unstructured, error)
	})
	if !ok {
		return
	}
	obj, err := decoder.Unstructured()
	if err != nil {
		return
	}
	writtenList, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	writtenByType := map[string]map[string]any{}
	for _, c := range writtenList {
		if m, ok := c.(map[string]any); ok {
			if typ, ok := m["type"].(string); ok {
				writtenByType[typ] = m
			}
		}
	}
	var found prunedFields
	for _, c := range wantList {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		w, ok := writtenByType[typ]
		if !ok {
			continue // the whole condition is gone: not these fields' doing
		}
		dropped := func(field string) bool {
			_, has := m[field]
			_, kept := w[field]
			return has && !kept
		}
		found.lastTransitionTime = found.lastTransitionTime || dropped("lastTransitionTime")
		found.observedGeneration = found.observedGeneration || dropped("observedGeneration")
	}
	e.conditions.mu.Lock()
	cur := e.conditions.pruned[gr]
	merged := prunedFields{cur.lastTransitionTime || found.lastTransitionTime, cur.observedGeneration || found.observedGeneration}
	if merged != cur {
		if e.conditions.pruned == nil {
			e.conditions.pruned = map[schema.GroupResource]prunedFields{}
		}
		e.conditions.pruned[gr] = merged
	}
	e.conditions.mu.Unlock()
	if merged == cur {
		return
	}
	found = merged
	var fields []string
	if found.lastTransitionTime {
		fields = append(fields, "lastTransitionTime")
	}
	if found.observedGeneration {
		fields = append(fields, "observedGeneration")
	}
	klog.FromContext(ctx).Info("The status schema drops fields of status.conditions that metactl fills; metactl stops filling them for this resource, so that the status settles (add them to the schema of the conditions, or x-kubernetes-preserve-unknown-fields, to have them)",
		"controller", e.name, "resource", gr.String(), "fields", fields)
}
