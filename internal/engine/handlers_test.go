package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/hooks/credentials"
)

// dependent returns a ConfigMap at resourceVersion rv, controlled by the
// Thing named owner (none when "").
func dependent(t *testing.T, rv, owner string) *informer.Object {
	t.Helper()
	refs := ""
	if owner != "" {
		refs = fmt.Sprintf(`,"ownerReferences":[{"apiVersion":"example.com/v1","kind":"Thing","name":%q,"uid":"uid-%s","controller":true}]`, owner, owner)
	}
	o, err := informer.NewObject(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"c","uid":"uid-c","resourceVersion":%q%s}}`, rv, refs))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestDependentHandlerQueuesThePreviousOwner: a dependent whose controller
// owner changes queues its new owner and its previous one, which lost it;
// an orphan goes to Orphan; a resync queues nothing.
func TestDependentHandlerQueuesThePreviousOwner(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	var orphans []string
	h := f.e.DependentHandler(Owners{
		Keys: func(_ metav1.Object, ref *metav1.OwnerReference) []Key {
			return []Key{{Namespace: "ns", Name: ref.Name}}
		},
		Orphan: func(d metav1.Object, _ trigger.Trigger) { orphans = append(orphans, d.GetName()) },
	})
	h.OnUpdate(dependent(t, "1", "a"), dependent(t, "2", "b"))
	if want := []string{"ns/a", "ns/b"}; !slices.Equal(f.queue.added, want) {
		t.Errorf("owner changed: queued %v, want %v", f.queue.added, want)
	}
	f.queue.added = nil
	h.OnUpdate(dependent(t, "2", "b"), dependent(t, "3", "b"))
	if want := []string{"ns/b"}; !slices.Equal(f.queue.added, want) {
		t.Errorf("same owner: queued %v, want %v", f.queue.added, want)
	}
	f.queue.added = nil
	h.OnUpdate(dependent(t, "3", "b"), dependent(t, "4", ""))
	if want := []string{"ns/b"}; !slices.Equal(f.queue.added, want) || !slices.Equal(orphans, []string{"c"}) {
		t.Errorf("released: queued %v, orphans %v; want %v, [c]", f.queue.added, orphans, want)
	}
	f.queue.added = nil
	h.OnUpdate(dependent(t, "4", "b"), dependent(t, "4", "b"))
	if len(f.queue.added) != 0 {
		t.Errorf("a resync queued %v", f.queue.added)
	}
}

// TestObjectHandler: objects that concern the controller are queued by
// their key; status-only changes are skipped when ignored; a delete is
// told to deleted and queued.
func TestObjectHandler(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	object := func(rv, status string) *informer.Object {
		o, err := informer.NewObject(fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"namespace":"ns","name":"p","uid":"uid-p","resourceVersion":%q},"status":{"n":%q}}`, rv, status))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	var deleted []string
	key := func(o metav1.Object) Key { return Key{Namespace: o.GetNamespace(), Name: o.GetName()} }
	h := f.e.ObjectHandler(key, nil, true, func(o metav1.Object) { deleted = append(deleted, o.GetName()) })
	h.OnAdd(object("1", "a"), false)
	h.OnUpdate(object("1", "a"), object("2", "b")) // status only: ignored
	h.OnDelete(object("2", "b"))
	if want := []string{"ns/p", "ns/p"}; !slices.Equal(f.queue.added, want) || !slices.Equal(deleted, []string{"p"}) {
		t.Errorf("queued %v, deleted %v; want %v, [p]", f.queue.added, deleted, want)
	}

	f.queue.added = nil
	none := f.e.ObjectHandler(key, func(metav1.Object) bool { return false }, false, nil)
	none.OnAdd(object("1", "a"), false)
	none.OnUpdate(object("1", "a"), object("2", "b"))
	if len(f.queue.added) != 0 {
		t.Errorf("objects of no concern queued %v", f.queue.added)
	}
}

// TestCustomizeCredentialErrorIsReported: the customize hook is called
// through the controller's HookCaller, so that a credential error of the
// customize hook is the controller's HookCredentialError (the
// HookAuthError condition), as the sync hook's is.
func TestCustomizeCredentialErrorIsReported(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	f.e.cfg.Hooks.Customize = f.e.cfg.Hooks.Sync
	f.hooks.customize = func() error {
		return &credentials.CredentialError{Hook: "customize", Setting: "authorization", Reason: "Secret not found",
			Reference: credentials.CredentialReference{Kind: "Secret", Namespace: "ns", Name: "token", Key: "token"}}
	}
	changed := make(chan struct{}, 10)
	f.e.hooks.OnHealthChange = func() { changed <- struct{}{} }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.e.Stop()
	f.e.Enqueue(f.key(), trigger.Trigger{Cause: trigger.CauseObject})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the customize hook's credential error never changed the hooks' health")
	}
	if err := f.e.HookCredentialError(); !credentials.IsCredentialError(err) {
		t.Errorf("HookCredentialError() = %v, want the customize hook's credential error", err)
	}
	if calls := f.hooks.names(); calls[0] != "customize" || slices.Contains(calls, "sync") {
		t.Errorf("calls %v, want customize and no sync", calls)
	}
}

// TestHandlersGiveTheirCauses: the object's handler queues an add of the
// informer's initial list for CauseStart, an update that changed nothing
// (an informer resync) for CauseResync, and a change for CauseObject with
// the generation; the dependents' handler queues for CauseDependent
// naming the dependent (the previous owner too), and its initial list for
// CauseStart.
func TestHandlersGiveTheirCauses(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	object := func(rv string, generation int64) *informer.Object {
		o, err := informer.NewObject(fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"namespace":"ns","name":"p","uid":"uid-p","resourceVersion":%q,"generation":%d}}`, rv, generation))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	key := func(o metav1.Object) Key { return Key{Namespace: o.GetNamespace(), Name: o.GetName()} }
	h := f.e.ObjectHandler(key, nil, false, nil)
	h.OnAdd(object("1", 1), true)
	h.OnAdd(object("1", 1), false)
	h.OnUpdate(object("1", 1), object("1", 1))
	h.OnUpdate(object("1", 1), object("2", 2))
	h.OnDelete(object("2", 2))
	want := []trigger.Trigger{
		{Cause: trigger.CauseStart},
		{Cause: trigger.CauseObject, Generation: 1},
		{Cause: trigger.CauseResync},
		{Cause: trigger.CauseObject, Generation: 2},
		{Cause: trigger.CauseObject, Generation: 2},
	}
	if !slices.Equal(f.queue.triggers, want) {
		t.Errorf("object events queued for %v, want %v", f.queue.triggers, want)
	}

	f.queue.added, f.queue.triggers = nil, nil
	d := f.e.DependentHandler(Owners{
		Keys: func(_ metav1.Object, ref *metav1.OwnerReference) []Key {
			return []Key{{Namespace: "ns", Name: ref.Name}}
		},
		Resource: "configmaps",
	})
	d.OnAdd(dependent(t, "1", "a"), true)
	d.OnUpdate(dependent(t, "1", "a"), dependent(t, "2", "b"))
	changed := trigger.Trigger{Cause: trigger.CauseDependent, Object: "configmaps/ns/c"}
	if want := []trigger.Trigger{{Cause: trigger.CauseStart}, changed, changed}; !slices.Equal(f.queue.triggers, want) {
		t.Errorf("dependent events queued for %v, want %v", f.queue.triggers, want)
	}
	if want := []string{"ns/a", "ns/a", "ns/b"}; !slices.Equal(f.queue.added, want) {
		t.Errorf("dependent events queued %v, want %v", f.queue.added, want)
	}
}
