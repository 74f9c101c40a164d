package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/trigger"
)

// heldObjects holds each patch until let go, telling when one waits.
type heldObjects struct {
	objectWriter
	waiting chan struct{}
	letGo   chan struct{}
	once    sync.Once
}

func (o *heldObjects) Patch(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
	o.once.Do(func() { close(o.waiting) })
	<-o.letGo
	return o.objectWriter.Patch(ctx, gvr, namespace, name, pt, data, subresources...)
}

// TestEnginesShareTurns: two controllers given one Options.Share of one
// turn. While the first one's sync writes its status (a turn held, the
// write held), the second one's sync does not start, so its hook is not
// called; once the write is let go, it is. (Seen failing with
// StartCaches not giving the loop Options.Share: the second hook was
// called while the first write was held.)
func TestEnginesShareTurns(t *testing.T) {
	share := loop.NewShare(1)
	first := newFixture(t, thing(), false, countChildren)
	second := newFixture(t, thing(), false, countChildren)
	held := &heldObjects{objectWriter: first.e.objects, waiting: make(chan struct{}), letGo: make(chan struct{})}
	first.e.objects = held
	var letGoOnce sync.Once
	letGo := func() { letGoOnce.Do(func() { close(held.letGo) }) }
	t.Cleanup(letGo)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, f := range []*fixture{first, second} {
		f.e.opts.Share = share
		if err := f.e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.e.Stop)
	}
	first.e.Enqueue(first.key(), trigger.Trigger{Cause: trigger.CauseObject})
	select {
	case <-held.waiting:
	case <-ctx.Done():
		t.Fatal("the first controller's sync never wrote")
	}
	second.e.Enqueue(second.key(), trigger.Trigger{Cause: trigger.CauseObject})
	// The second sync may not start while the first holds the only
	// turn: give it a second to show that it does.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if second.hooks.count() > 0 {
			t.Fatal("the second controller's hook was called while the first controller's sync held the Share's only turn")
		}
		time.Sleep(10 * time.Millisecond)
	}
	letGo()
	for second.hooks.count() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the second controller's hook was never called once the first controller's write was let go")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
