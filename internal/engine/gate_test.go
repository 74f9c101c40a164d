package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/informer"
)

// fakeGate admits the namespaces of admit and begins every sync.
type fakeGate struct {
	mu    sync.Mutex
	admit map[string]bool
}

func (g *fakeGate) Admits(namespace string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.admit[namespace]
}

func (g *fakeGate) set(namespace string, admit bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admit[namespace] = admit
}

func (g *fakeGate) Begin(ctx context.Context, _ string) (context.Context, func(), bool) {
	return ctx, func() {}, true
}

// gatedFixture is newFixture with answer, its queue behind gate, as
// StartCaches puts it with Options.Gate.
func gatedFixture(t *testing.T, gate Gate, answer func(name string, request *fakeRequest) (*fakeResponse, error)) *fixture {
	f := newFixture(t, thing(), false, answer)
	f.e.opts.Gate = gate
	f.e.queue = gatedQueue{queue: f.queue, gate: gate}
	return f
}

// TestGatedQueueDropsEveryPath: every path by which the Engine queues a
// key of an object (the parent "ns/p") drops it when the Gate does not
// admit its namespace, and queues it when it does: Enqueue, the object's
// and a dependent's events, an event held during a sync and released at
// its end (not an echo), the resyncAfterSeconds of a hook that did not
// settle, a settled sync's requeueAfter (which the loop queues itself),
// and EnqueueAdmitted. Only the queue is looked at: with the key's
// namespace admitted, each path queues (adds or delayed adds, or a
// requeueAfter returned).
func TestGatedQueueDropsEveryPath(t *testing.T) {
	object := func(t *testing.T) *informer.Object {
		o, err := informer.NewObject([]byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"namespace":"ns","name":"p","uid":"uid-p","resourceVersion":"8"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	paths := []struct {
		name string
		// answer is the hook's (countChildren when nil).
		answer func(f **fixture) func(string, *fakeRequest) (*fakeResponse, error)
		// queue queues the key through the path, and returns the
		// requeueAfter of a sync it ran (0: none).
		queue func(t *testing.T, f *fixture) time.Duration
	}{
		{name: "Enqueue", queue: func(_ *testing.T, f *fixture) time.Duration {
			f.e.Enqueue(f.key(), trigger.Trigger{Cause: trigger.CauseObject})
			return 0
		}},
		{name: "object event", queue: func(t *testing.T, f *fixture) time.Duration {
			h := f.e.ObjectHandler(func(metav1.Object) Key { return f.key() }, nil, false, nil)
			h.OnAdd(object(t), false)
			return 0
		}},
		{name: "dependent event", queue: func(t *testing.T, f *fixture) time.Duration {
			h := f.e.DependentHandler(Owners{Keys: func(metav1.Object, *metav1.OwnerReference) []Key { return []Key{f.key()} }, Resource: "configmaps"})
			h.OnAdd(dependent(t, "1", "p"), false)
			return 0
		}},
		{name: "event held during a sync", answer: func(f **fixture) func(string, *fakeRequest) (*fakeResponse, error) {
			return func(name string, request *fakeRequest) (*fakeResponse, error) {
				// An event of the key while it is synced: held, then
				// queued at the sync's end.
				(*f).e.enqueueFor((*f).key(), nil, trigger.Trigger{Cause: trigger.CauseRelated, Object: "configmaps/ns/r"})
				return countChildren(name, request)
			}
		}, queue: func(t *testing.T, f *fixture) time.Duration {
			if err := f.sync(t); err != nil {
				t.Fatalf("sync: %v", err)
			}
			return 0
		}},
		{name: "resyncAfterSeconds of an unsettled hook", answer: func(**fixture) func(string, *fakeRequest) (*fakeResponse, error) {
			calls := 0
			return func(string, *fakeRequest) (*fakeResponse, error) {
				calls++
				return &fakeResponse{Answer: Answer{Status: map[string]any{"counter": int64(calls)}, ResyncAfterSeconds: 3}}, nil
			}
		}, queue: func(t *testing.T, f *fixture) time.Duration {
			if err := f.sync(t); !IsNotSettled(err) {
				t.Fatalf("sync: %v, want errNotSettled", err)
			}
			return 0
		}},
		{name: "requeueAfter of a settled sync", queue: func(t *testing.T, f *fixture) time.Duration {
			sync := f.e.gated(func(context.Context, *loop.Sync[Key]) (time.Duration, error) { return 3 * time.Second, nil })
			after, err := sync(context.Background(), &loop.Sync[Key]{Key: f.key()})
			if err != nil {
				t.Fatalf("sync: %v", err)
			}
			return after
		}},
		{name: "EnqueueAdmitted", queue: func(_ *testing.T, f *fixture) time.Duration {
			f.e.EnqueueAdmitted(trigger.Trigger{Cause: trigger.CauseHandover})
			return 0
		}},
	}
	for _, p := range paths {
		for _, admitted := range []bool{true, false} {
			name := p.name + "/not admitted"
			if admitted {
				name = p.name + "/admitted"
			}
			t.Run(name, func(t *testing.T) {
				gate := &fakeGate{admit: map[string]bool{"ns": true}}
				var f *fixture
				answer := countChildren
				if p.answer != nil {
					answer = p.answer(&f)
				}
				f = gatedFixture(t, gate, answer)
				// Admitted or not from now on: a sync in the path
				// begins, the queueing after it is refused.
				gate.set("ns", admitted)
				after := p.queue(t, f)
				queued := len(f.queue.added) + len(f.queue.after)
				if after > 0 {
					queued++
				}
				switch {
				case admitted && queued == 0:
					t.Errorf("nothing queued with the namespace admitted: the path does not queue")
				case !admitted && queued > 0:
					t.Errorf("queued %v, delayed %v, requeueAfter %v with the namespace not admitted", f.queue.added, f.queue.after, after)
				}
			})
		}
	}
}

// TestGatedSyncRefused: a sync the Gate does not Begin returns
// loop.ErrSkipped without calling the sync; one whose context the Gate
// cancelled returns its error wrapped in loop.ErrSkipped, and done is
// called once either way it began.
func TestGatedSyncRefused(t *testing.T) {
	f := newFixture(t, thing(), false, countChildren)
	refused := errors.New("refused")
	var calls, dones int
	f.e.opts.Gate = beginFunc(func(ctx context.Context, _ string) (context.Context, func(), bool) {
		calls++
		if calls == 1 {
			return nil, nil, false
		}
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx, func() { dones++ }, true
	})
	ran := 0
	sync := f.e.gated(func(ctx context.Context, _ *loop.Sync[Key]) (time.Duration, error) {
		ran++
		return time.Second, errors.Join(refused, ctx.Err())
	})
	if _, err := sync(context.Background(), &loop.Sync[Key]{Key: f.key()}); !errors.Is(err, loop.ErrSkipped) || ran != 0 {
		t.Errorf("refused: err %v, sync ran %d times; want loop.ErrSkipped and none", err, ran)
	}
	after, err := sync(context.Background(), &loop.Sync[Key]{Key: f.key()})
	if !errors.Is(err, loop.ErrSkipped) || !errors.Is(err, refused) || after != 0 || dones != 1 {
		t.Errorf("cancelled: after %v, err %v, done %d times; want 0, loop.ErrSkipped wrapping the sync's error, once", after, err, dones)
	}
}

// beginFunc is a Gate that admits every namespace and begins as it says.
type beginFunc func(ctx context.Context, namespace string) (context.Context, func(), bool)

func (beginFunc) Admits(string) bool { return true }
func (b beginFunc) Begin(ctx context.Context, namespace string) (context.Context, func(), bool) {
	return b(ctx, namespace)
}

// TestForgetNotAdmitted: ForgetNotAdmitted drops the failure, the
// unsettled report and the Synced bookkeeping of an object whose
// namespace the Gate no longer admits, and keeps those of one it admits.
func TestForgetNotAdmitted(t *testing.T) {
	for _, admitted := range []bool{true, false} {
		f := newFixture(t, thing(), false, countChildren)
		gate := &fakeGate{admit: map[string]bool{"ns": admitted}}
		f.e.opts.Gate = gate
		key := f.key()
		f.e.failing.Failed(key, errors.New("failing on purpose"))
		f.e.unsettled.reported = map[Key]bool{key: true}
		f.e.synced.written = map[Key]time.Time{key: time.Now()}
		f.e.ForgetNotAdmitted()
		kept := f.e.failing.Summary().Count == 1
		if f.e.unsettled.reported[key] != kept || !f.e.synced.written[key].IsZero() != kept {
			t.Errorf("admitted %v: failing kept %v, unsettled report kept %v, Synced bookkeeping kept %v; want all the same",
				admitted, kept, f.e.unsettled.reported[key], !f.e.synced.written[key].IsZero())
		}
		if kept != admitted {
			t.Errorf("admitted %v: the object's state kept %v", admitted, kept)
		}
	}
}
