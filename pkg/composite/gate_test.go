package composite

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/internal/trigger"
)

// The fast tests of the engine's Gate (sharding, docs/scaling.md) on a
// CompositeController: the real Engine and work queue (one worker, so
// keys are synced one at a time in the order queued) over
// internal/inmemory's store, with a fake Gate (ruletest.Gate).

// gated is a started CompositeController of things and their configmaps
// whose sync hook is hook, behind gate.
type gated struct {
	c       *Controller
	cluster *ruletest.Cluster
	gate    *ruletest.Gate
	hook    *ruletest.Hook
	retries *ruletest.Retries
}

// startGated starts (Start: informers and work queue) the controller on
// a cluster holding objs, with gate, one worker, a record of syncs, and
// retries that are counted and never come due; it stops when the test
// ends.
func startGated(t *testing.T, gate *ruletest.Gate, answer func(req map[string]any) any, objs ...*unstructured.Unstructured) *gated {
	t.Helper()
	return startGatedWith(t, gate, nil, answer, objs...)
}

// startGatedWith is startGated with edit applied to the
// CompositeController's spec.
func startGatedWith(t *testing.T, gate *ruletest.Gate, edit func(spec map[string]any), answer func(req map[string]any) any, objs ...*unstructured.Unstructured) *gated {
	t.Helper()
	g := &gated{gate: gate, hook: ruletest.NewHook(t, answer), retries: &ruletest.Retries{}}
	g.cluster = ruletest.NewCluster(ruleResources(t), []schema.GroupVersionResource{ruleThings}, objs...)
	g.cluster.Options.Gate = gate
	g.cluster.Options.Workers = 1
	g.cluster.Options.RateLimiter = g.retries
	g.cluster.Options.History = history.NewStore(history.StoreOptions{})
	cc := ruleCompositeController(ruleThings, "InPlace", func(spec map[string]any) {
		spec["hooks"] = map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": g.hook.URL + "/sync", "timeout": "5s"}}}
		if edit != nil {
			edit(spec)
		}
	})
	var err error
	if g.c, err = New(t.Context(), cc, g.cluster.Options); err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.c.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(g.c.Stop)
	return g
}

// settle returns the namespaces the Gate was asked to Begin, in order,
// once every key queued so far has been synced (ruletest.Gate.Settle).
func (g *gated) settle(t *testing.T) []string {
	t.Helper()
	return g.gate.Settle(t, func(namespace string) {
		g.c.eng.Enqueue(engine.Key{Resource: g.c.parents, Namespace: namespace, Name: "marker"}, trigger.Trigger{Cause: trigger.CauseObject})
	})
}

// hooked returns the namespace/name of the parents the hook was given,
// in order.
func (g *gated) hooked() []string {
	var out []string
	for _, req := range g.hook.Requests() {
		md := req["parent"].(map[string]any)["metadata"].(map[string]any)
		out = append(out, md["namespace"].(string)+"/"+md["name"].(string))
	}
	return out
}

// gatedParent is the Thing namespace/name, whose spec.selector selects
// parent=p (answerChild's label).
func gatedParent(namespace, name string) *unstructured.Unstructured {
	p := inmemory.Object("test.metactl.io/v1", "Thing", namespace, name, nil, nil)
	p.Object["spec"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"parent": "p"}}}
	return p
}

// gatedChild is ConfigMap namespace/name controlled by the Thing
// namespace/owner (which need not exist).
func gatedChild(namespace, name, owner string) *unstructured.Unstructured {
	cm := inmemory.Object("v1", "ConfigMap", namespace, name, nil, nil)
	parent := gatedParent(namespace, owner)
	cm.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
		"apiVersion": parent.GetAPIVersion(), "kind": parent.GetKind(), "name": owner, "uid": string(parent.GetUID()), "controller": true}}
	return cm
}

// answerWrites answers with a child and a status: a sync that gets as far
// as writing writes.
func answerWrites(map[string]any) any {
	return map[string]any{"status": map[string]any{"synced": true}, "children": []any{answerChild("c", "v")}}
}

// TestGateDropsKeysOfOtherNamespaces: with a Gate that admits namespace
// in, no key of namespace out is queued, whichever event would queue it:
// a parent's (the informer's list), a child's of a parent (its
// controller reference; the parent need not be cached).
func TestGateDropsKeysOfOtherNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []*unstructured.Unstructured
		// wantIn is how many syncs of namespace in begin.
		wantIn int
	}{
		{name: "parent event", objs: []*unstructured.Unstructured{gatedParent("in", "p"), gatedParent("out", "p")}, wantIn: 1},
		{name: "child event", objs: []*unstructured.Unstructured{gatedChild("in", "c", "gone"), gatedChild("out", "c", "gone")}, wantIn: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGated(t, ruletest.NewGate("in"), answerWrites, tc.objs...)
			begun := g.settle(t)
			if n := ruletest.Count(begun, "out"); n != 0 {
				t.Errorf("%d syncs of namespace out were started (Begin: %v), want none: its keys were queued", n, begun)
			}
			if n := ruletest.Count(begun, "in"); n != tc.wantIn {
				t.Errorf("%d syncs of namespace in were started (Begin: %v), want %d", n, begun, tc.wantIn)
			}
		})
	}
}

// TestGateRefusedSyncDoesNothing: a sync whose Begin the Gate refuses
// (the key admitted when queued, the bucket inactive since) calls no
// hook, writes nothing, records no Event, no sync in the record and no
// failure, and is not retried.
func TestGateRefusedSyncDoesNothing(t *testing.T) {
	gate := ruletest.NewGate()
	gate.Set("in", true, false)
	g := startGated(t, gate, answerWrites, gatedParent("in", "p"))
	begun := g.settle(t)
	if n := ruletest.Count(begun, "in"); n != 1 {
		t.Fatalf("Begin was called %d times for namespace in (%v), want once", n, begun)
	}
	if h := g.hooked(); len(h) > 0 {
		t.Errorf("the hook was called for %v", h)
	}
	if w := g.cluster.Writes(); len(w) > 0 {
		t.Errorf("the refused sync wrote %v", w)
	}
	if e := g.cluster.Events(); len(e) > 0 {
		t.Errorf("the refused sync recorded Events %v", e)
	}
	if s := g.c.History("in/p"); len(s) > 0 {
		t.Errorf("the refused sync was recorded: %+v", s[0])
	}
	if n := g.c.Failing().Summary().Count; n != 0 {
		t.Errorf("%d objects failing, want none", n)
	}
	if n := g.retries.Of("in/p"); n != 0 {
		t.Errorf("the refused sync was retried %d times", n)
	}
}

// TestGateCancelledSyncWritesNothingAfter: a sync whose bucket is given
// up while its hook is called (the Gate cancels its context) writes
// nothing after, records no Event and no failure, is not retried, and
// ends (done) once.
func TestGateCancelledSyncWritesNothingAfter(t *testing.T) {
	gate := ruletest.NewGate("in")
	g := startGated(t, gate, func(req map[string]any) any {
		gate.Revoke("in")
		return answerWrites(req)
	}, gatedParent("in", "p"))
	g.settle(t)
	if h := g.hooked(); !slices.Equal(h, []string{"in/p"}) {
		t.Errorf("the hook was called for %v, want in/p once", h)
	}
	if w := g.cluster.Writes(); len(w) > 0 {
		t.Errorf("the cancelled sync wrote %v", w)
	}
	if e := g.cluster.Events(); len(e) > 0 {
		t.Errorf("the cancelled sync recorded Events %v", e)
	}
	if n := g.c.Failing().Summary().Count; n != 0 {
		t.Errorf("%d objects failing, want none", n)
	}
	if n := g.retries.Of("in/p"); n != 0 {
		t.Errorf("the cancelled sync was retried %d times", n)
	}
	if ended := g.gate.Ended(); ruletest.Count(ended, "in") != 1 {
		t.Errorf("syncs ended %v, want one of namespace in", ended)
	}
}

// TestEnqueueAdmitted: EnqueueAdmitted queues, for its trigger, every
// cached parent whose namespace the Gate admits now, and no other: the
// parents of a bucket just taken over, which raised no event.
func TestEnqueueAdmitted(t *testing.T) {
	gate := ruletest.NewGate("in")
	g := startGated(t, gate, func(map[string]any) any { return map[string]any{} },
		gatedParent("in", "a"), gatedParent("in", "b"), gatedParent("taken", "c"), gatedParent("out", "d"))
	if begun := g.settle(t); ruletest.Count(begun, "taken") != 0 {
		t.Fatalf("namespace taken was synced before it was admitted: %v", begun)
	}
	first := len(g.hooked())
	gate.Set("taken", true, true)
	gate.Set("out", false, true) // begun if queued: not admitted
	g.c.EnqueueAdmitted(trigger.Trigger{Cause: trigger.CauseHandover})
	g.settle(t)
	got := g.hooked()[first:]
	slices.Sort(got)
	got = slices.Compact(got) // a sync may call the hook more than once
	if want := []string{"in/a", "in/b", "taken/c"}; !slices.Equal(got, want) {
		t.Errorf("EnqueueAdmitted synced %v, want %v", got, want)
	}
	if s := g.c.History("taken/c"); len(s) != 1 || !slices.Equal(s[0].Triggers, []trigger.Trigger{{Cause: trigger.CauseHandover}}) {
		t.Errorf("the record of taken/c is %+v, want one sync for handover", s)
	}
}

// TestGateDropsRelatedChanges: a related object's change (the customize
// hook's rules select it) queues its parent through the Gate too: with
// the parent's namespace no longer admitted once its first sync began,
// the related objects' informer, listed during that sync, queues no
// second sync.
func TestGateDropsRelatedChanges(t *testing.T) {
	gate := ruletest.NewGate("in")
	g := startGatedWith(t, gate, func(spec map[string]any) {
		hooks := spec["hooks"].(map[string]any)
		url := hooks["sync"].(map[string]any)["webhook"].(map[string]any)["url"].(string)
		hooks["customize"] = map[string]any{"webhook": map[string]any{"url": url + "/customize", "timeout": "5s"}}
	}, func(req map[string]any) any {
		if _, sync := req["children"]; !sync {
			gate.Set("in", false, true)
			return map[string]any{"relatedResources": []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}}}
		}
		return map[string]any{}
	}, gatedParent("in", "p"), inmemory.Object("v1", "Secret", "in", "r", nil, nil))
	begun := g.settle(t)
	if n := ruletest.Count(begun, "in"); n != 1 {
		t.Errorf("%d syncs of namespace in began (%v), want 1: a related change queued the parent", n, begun)
	}
	if h := g.hooked(); len(h) == 0 {
		t.Errorf("the sync hook was not called")
	}
}
