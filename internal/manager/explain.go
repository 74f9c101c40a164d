package manager

import (
	"context"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/explain"
)

// Explain answers `metactl explain` for one object (explain.Source): this
// process, whether it leads, and what each of its running controllers
// knows of the object. A standby answers that it does not lead, and
// nothing more; so, sharded, does a replica that does not work on the
// object (worksOn), so that one replica answers for each object. It
// reads caches only: no hook is called, no API request made.
func (m *Manager) Explain(_ context.Context, req explain.Request) (*explain.Answer, error) {
	host, _ := os.Hostname()
	a := &explain.Answer{Object: req, Process: explain.Process{Name: host}, Controllers: []explain.Controller{}}
	if m.standby.Load() || !m.worksOn(req.Namespace) {
		return a, nil
	}
	a.Process.Leading = true
	m.mu.Lock()
	runners := make([]runner, 0, len(m.running))
	for _, r := range m.running {
		if r.isStarted() && r.startErr == nil {
			runners = append(runners, r.controller)
		}
	}
	m.mu.Unlock()
	for _, r := range runners {
		r.Explain(a)
	}
	// One order whatever the map's.
	slices.SortFunc(a.Controllers, func(x, y explain.Controller) int {
		return strings.Compare(x.Kind+"/"+x.Name, y.Kind+"/"+y.Name)
	})
	slices.SortFunc(a.NotSelected, func(x, y explain.NotSelected) int {
		return strings.Compare(x.Kind+"/"+x.Name, y.Kind+"/"+y.Name)
	})
	return a, nil
}

// HookResources returns the resources whose objects the hook calls of
// the running controller named controller ("compositecontroller/NAME" or
// "decoratorcontroller/NAME", as hookrecord names it) carry
// (engine.Engine.HookResources), false when this process runs no such
// controller: who may list them all may read its recorded hook calls
// (/debug/record).
func (m *Manager) HookResources(controller string) ([]schema.GroupVersionResource, bool) {
	kind, name, ok := strings.Cut(controller, "/")
	if !ok {
		return nil, false
	}
	for _, k := range m.kinds {
		if strings.ToLower(k.name) != kind {
			continue
		}
		m.mu.Lock()
		r := m.running[queueKey(k.name, name)]
		runs := r != nil && r.isStarted() && r.startErr == nil
		m.mu.Unlock()
		if !runs {
			return nil, false
		}
		return r.controller.HookResources(), true
	}
	return nil, false
}
