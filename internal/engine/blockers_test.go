package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// TestBlockersQueueWaitersOnceWhenTheHolderGoes: the keys that waited for
// a holder are returned once when it goes, under the name the dependents'
// handler gives it; a forgotten key is not; another holder's waiters are
// unaffected.
func TestBlockersQueueWaitersOnceWhenTheHolderGoes(t *testing.T) {
	deployments := &children.Resource{Resource: &discovery.Resource{APIVersion: "apps/v1", Name: "deployments", Kind: "Deployment", Namespaced: true}}
	blocked := func(name string) []children.Blocked {
		return []children.Blocked{{Resource: deployments, Namespace: "ns", Name: name}}
	}
	var bs blockers
	a, b, c := Key{Namespace: "ns", Name: "a"}, Key{Namespace: "ns", Name: "b"}, Key{Namespace: "ns", Name: "c"}
	bs.wait(a, blocked("web"))
	bs.wait(b, blocked("web"))
	bs.wait(c, blocked("web"))
	bs.wait(c, blocked("db"))
	bs.forget(b)
	got := bs.gone("deployments.apps/ns/web")
	slices.SortFunc(got, func(x, y Key) int { return strings.Compare(x.Name, y.Name) })
	if want := []Key{a, c}; !slices.Equal(got, want) {
		t.Errorf("waiters of web: %v, want %v", got, want)
	}
	if again := bs.gone("deployments.apps/ns/web"); len(again) != 0 {
		t.Errorf("waiters of web again: %v, want none", again)
	}
	if db := bs.gone("deployments.apps/ns/db"); !slices.Equal(db, []Key{c}) {
		t.Errorf("waiters of db: %v, want [%v]", db, c)
	}
	if len(bs.waiting) != 0 || len(bs.holders) != 0 {
		t.Errorf("left: waiting %v, holders %v", bs.waiting, bs.holders)
	}
}
