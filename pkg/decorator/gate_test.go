package decorator

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/ruletest"
	"github.com/metactl/metactl/internal/trigger"
)

// The fast tests of the engine's Gate (sharding, docs/scaling.md) on a
// DecoratorController: the real Engine and work queue (one worker, so
// keys are synced one at a time in the order queued) over
// internal/inmemory's store, with a fake Gate (ruletest.Gate). The
// composite's twins are in pkg/composite/gate_test.go.

// gated is a started DecoratorController "rules" of the configmaps
// labelled decorate=yes with attachments secrets, whose sync hook is
// hook, behind gate.
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
	g := &gated{gate: gate, hook: ruletest.NewHook(t, answer), retries: &ruletest.Retries{}}
	g.cluster = ruletest.NewCluster(ruleServed(t), nil, objs...)
	g.cluster.Options.Gate = gate
	g.cluster.Options.Workers = 1
	g.cluster.Options.RateLimiter = g.retries
	g.cluster.Options.History = history.NewStore(history.StoreOptions{})
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "rules", "uid": "dc-uid-rules", "generation": int64(1)},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "yes"}}}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":       map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": g.hook.URL + "/sync", "timeout": "5s"}}},
		},
	}}
	var err error
	if g.c, err = New(t.Context(), dc, g.cluster.Options); err != nil {
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
		g.c.eng.Enqueue(engine.Key{Resource: g.c.watched[0].Watched, Namespace: namespace, Name: "marker"}, trigger.Trigger{Cause: trigger.CauseObject})
	})
}

// hooked returns the namespace/name of the objects the hook was given,
// in order.
func (g *gated) hooked() []string {
	var out []string
	for _, req := range g.hook.Requests() {
		md := req["object"].(map[string]any)["metadata"].(map[string]any)
		out = append(out, md["namespace"].(string)+"/"+md["name"].(string))
	}
	return out
}

// gatedObject is the ConfigMap namespace/name labelled decorate=yes.
func gatedObject(namespace, name string) *unstructured.Unstructured {
	return inmemory.Object("v1", "ConfigMap", namespace, name, map[string]string{"decorate": "yes"}, nil)
}

// gatedAttachment is the Secret namespace/name, an attachment by "rules"
// of the ConfigMap namespace/owner (which need not exist).
func gatedAttachment(namespace, name, owner string) *unstructured.Unstructured {
	s := inmemory.Object("v1", "Secret", namespace, name, nil, map[string]string{AttachmentAnnotation: "rules"})
	s.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner, UID: gatedObject(namespace, owner).GetUID(), Controller: new(true)}})
	return s
}

// answerWrites answers with an attachment and a label: a sync that gets
// as far as writing writes.
func answerWrites(map[string]any) any {
	return map[string]any{"labels": map[string]any{"synced": "yes"}, "attachments": []any{answerSecret("s")}}
}

// TestGateDropsKeysOfOtherNamespaces: with a Gate that admits namespace
// in, no key of namespace out is queued, whichever event would queue it:
// a decorated object's (the informer's list), an attachment's (its
// controller reference; the object need not be cached).
func TestGateDropsKeysOfOtherNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []*unstructured.Unstructured
	}{
		{name: "object event", objs: []*unstructured.Unstructured{gatedObject("in", "o"), gatedObject("out", "o")}},
		{name: "attachment event", objs: []*unstructured.Unstructured{gatedAttachment("in", "s", "gone"), gatedAttachment("out", "s", "gone")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGated(t, ruletest.NewGate("in"), answerWrites, tc.objs...)
			begun := g.settle(t)
			if n := ruletest.Count(begun, "out"); n != 0 {
				t.Errorf("%d syncs of namespace out were started (Begin: %v), want none: its keys were queued", n, begun)
			}
			if n := ruletest.Count(begun, "in"); n != 1 {
				t.Errorf("%d syncs of namespace in were started (Begin: %v), want 1", n, begun)
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
	g := startGated(t, gate, answerWrites, gatedObject("in", "o"))
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
	if s := g.c.History("0|in/o"); len(s) > 0 {
		t.Errorf("the refused sync was recorded: %+v", s[0])
	}
	if n := g.c.Failing().Summary().Count; n != 0 {
		t.Errorf("%d objects failing, want none", n)
	}
	if n := g.retries.Of("0|in/o"); n != 0 {
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
	}, gatedObject("in", "o"))
	g.settle(t)
	if h := g.hooked(); !slices.Equal(h, []string{"in/o"}) {
		t.Errorf("the hook was called for %v, want in/o once", h)
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
	if n := g.retries.Of("0|in/o"); n != 0 {
		t.Errorf("the cancelled sync was retried %d times", n)
	}
	if ended := g.gate.Ended(); ruletest.Count(ended, "in") != 1 {
		t.Errorf("syncs ended %v, want one of namespace in", ended)
	}
}

// TestEnqueueAdmitted: EnqueueAdmitted queues, for its trigger, every
// cached decorated object whose namespace the Gate admits now, and no
// other: the objects of a bucket just taken over, which raised no event.
func TestEnqueueAdmitted(t *testing.T) {
	gate := ruletest.NewGate("in")
	g := startGated(t, gate, func(map[string]any) any { return map[string]any{} },
		gatedObject("in", "a"), gatedObject("in", "b"), gatedObject("taken", "c"), gatedObject("out", "d"))
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
	if s := g.c.History("0|taken/c"); len(s) != 1 || !slices.Equal(s[0].Triggers, []trigger.Trigger{{Cause: trigger.CauseHandover}}) {
		t.Errorf("the record of taken/c is %+v, want one sync for handover", s)
	}
}
