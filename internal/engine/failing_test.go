package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/loop"
)

// TestFailingTracksSyncResults: an object enters the set on a failed sync
// and leaves it on a successful or waiting one; a conflict changes nothing.
// The callback hears of each change, and only of changes.
func TestFailingTracksSyncResults(t *testing.T) {
	var f Failing
	changes := 0
	f.OnChange(func() { changes++ })
	results := map[Key]error{}
	sync := f.track(func(_ context.Context, s *loop.Sync[Key]) (time.Duration, error) {
		return time.Second, results[s.Key]
	})
	run := func(key string, err error) {
		t.Helper()
		results[keyOf(key)] = err
		after, got := sync(context.Background(), &loop.Sync[Key]{Key: keyOf(key)})
		if after != time.Second || got != err {
			t.Fatalf("Track changed the result: %v, %v", after, got)
		}
	}
	hookDown := errors.New("sync hook: connection refused")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "things"}, "a", errors.New("changed"))

	run("ns/a", hookDown)
	run("ns/b", hookDown)
	run("ns/a", hookDown) // same error: no change
	if got := f.Summary().Count; got != 2 || changes != 2 {
		t.Errorf("after two failing objects: count %d, changes %d; want 2, 2", got, changes)
	}
	run("ns/a", conflict)
	if got := f.Summary().Count; got != 2 || changes != 2 {
		t.Errorf("a conflict changed the set: count %d, changes %d", got, changes)
	}
	run("ns/a", nil)
	run("ns/b", fmt.Errorf("not yet: %w", loop.ErrWaiting))
	run("ns/c", nil) // never failed: no change
	if got := f.Summary(); got.Count != 0 || got.Message != "" || changes != 4 {
		t.Errorf("after recovery: %+v, changes %d; want none, 4", got, changes)
	}
}

// TestFailingIgnoresCancelledSyncs: a sync that fails because its
// context was cancelled (its controller stopped) is not recorded as the
// object's failure, and the callback is not called.
func TestFailingIgnoresCancelledSyncs(t *testing.T) {
	var f Failing
	changes := 0
	f.OnChange(func() { changes++ })
	sync := f.track(func(ctx context.Context, _ *loop.Sync[Key]) (time.Duration, error) {
		return 0, fmt.Errorf("sync hook: %w", ctx.Err())
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sync(ctx, &loop.Sync[Key]{Key: keyOf("ns/a")}); err == nil {
		t.Fatal("Track dropped the error")
	}
	if got := f.Summary().Count; got != 0 || changes != 0 {
		t.Errorf("after a cancelled sync: count %d, changes %d; want 0, 0", got, changes)
	}
}

// TestFailingSummaryNamesAFewInKeyOrder: the message names the first
// failingNamed objects by key, quotes the first one's error, and counts
// the rest.
func TestFailingSummaryNamesAFewInKeyOrder(t *testing.T) {
	f := Failing{Describe: func(key Key) string { return "things " + key.String() }}
	f.Failed(keyOf("ns/b"), errors.New("boom b"))
	one := f.Summary()
	if one.Count != 1 || one.Message != "1 object failed its last sync: things ns/b: boom b (see the objects' Events)" {
		t.Errorf("one: %+v", one)
	}
	for _, key := range []string{"ns/e", "ns/d", "ns/a", "ns/c"} {
		f.Failed(keyOf(key), errors.New("boom "+key[3:]))
	}
	got := f.Summary()
	want := "5 objects failed their last sync: things ns/a: boom a; also things ns/b, things ns/c and 2 more"
	if got.Count != 5 || !strings.HasPrefix(got.Message, want) {
		t.Errorf("five: %+v\nwant message starting %q", got, want)
	}
	long := strings.Repeat("é", maxErrorLength)
	f.Failed(keyOf("ns/0"), errors.New(long))
	if msg := f.Summary().Message; strings.Contains(msg, long) || !strings.Contains(msg, "...") || !strings.Contains(msg, "éé") {
		t.Errorf("a long error is not cut short: %d bytes", len(msg))
	}
}

// keyOf is the queue key of the object named namespace/name (name: a
// cluster-scoped one), of no resource.
func keyOf(namespaceName string) Key {
	namespace, name, ok := strings.Cut(namespaceName, "/")
	if !ok {
		return Key{Name: namespaceName}
	}
	return Key{Namespace: namespace, Name: name}
}
