package echo

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/trigger"
)

func version(uid, rv string) metav1.Object {
	return &metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}
}

// TestEchoIsFilteredOnce: the event of a version the controller wrote is
// not enqueued, once; another version of the same object, an object never
// written, and a delete are.
func TestEchoIsFilteredOnce(t *testing.T) {
	e := New[string]()
	e.Expect("ns/a", version("u1", "5"))
	if e.ShouldEnqueue("ns/a", version("u1", "5"), trigger.Trigger{}) {
		t.Error("the echo of a write was enqueued")
	}
	if !e.ShouldEnqueue("ns/a", version("u1", "5"), trigger.Trigger{}) {
		t.Error("the same version counted as an echo twice")
	}
	e.Expect("ns/a", version("u1", "6"))
	if !e.ShouldEnqueue("ns/a", version("u1", "7"), trigger.Trigger{}) {
		t.Error("a later version, written by someone else, was taken for an echo")
	}
	if !e.ShouldEnqueue("ns/a", version("u2", "6"), trigger.Trigger{}) {
		t.Error("another object with the written resourceVersion was taken for an echo")
	}
	if !e.ShouldEnqueue("ns/a", nil, trigger.Trigger{}) {
		t.Error("a delete was not enqueued")
	}
	if e.ShouldEnqueue("ns/a", version("u1", "6"), trigger.Trigger{}) {
		t.Error("the echo of the second write was enqueued")
	}
	if n := expectedObjects(e); n != 0 {
		t.Errorf("%d objects still expected after their echoes", n)
	}
}

// TestExpectIgnoresIncompleteObjects: a write result without UID or
// resourceVersion (a dry run, say) is not remembered.
func TestExpectIgnoresIncompleteObjects(t *testing.T) {
	e := New[string]()
	e.Expect("ns/a", nil)
	e.Expect("ns/a", version("", "5"))
	e.Expect("ns/a", version("u1", ""))
	if n := expectedObjects(e); n != 0 {
		t.Errorf("%d objects expected, want 0", n)
	}
	if !e.ShouldEnqueue("ns/a", version("u1", ""), trigger.Trigger{}) {
		t.Error("an event without resourceVersion was taken for an echo")
	}
}

// TestEventsDuringASyncAreJudgedAtEnd: events for a key being synced are
// held (not enqueued); at End, echoes of the sync's writes need no new sync,
// even when they arrived before the write's response was recorded, and
// anything else does, with its trigger.
func TestEventsDuringASyncAreJudgedAtEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		held   []metav1.Object // events while the sync runs, before its writes are recorded
		writes []metav1.Object
		resync []int // the held events that need a sync: End returns their triggers
	}{
		{name: "no event"},
		{name: "the echo before the response", held: []metav1.Object{version("u1", "5")}, writes: []metav1.Object{version("u1", "5")}},
		{name: "two echoes", held: []metav1.Object{version("u1", "5"), version("u2", "9")}, writes: []metav1.Object{version("u1", "5"), version("u2", "9")}},
		{name: "another change", held: []metav1.Object{version("u1", "4")}, writes: []metav1.Object{version("u1", "5")}, resync: []int{0}},
		{name: "an echo and another change", held: []metav1.Object{version("u1", "5"), version("u3", "1")}, writes: []metav1.Object{version("u1", "5")}, resync: []int{1}},
		{name: "a delete", held: []metav1.Object{nil}, resync: []int{0}},
		{name: "the same echo twice", held: []metav1.Object{version("u1", "5"), version("u1", "5")}, writes: []metav1.Object{version("u1", "5")}, resync: []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New[string]()
			e.Begin("ns/a")
			triggerOf := func(i int) trigger.Trigger {
				return trigger.Trigger{Cause: trigger.CauseDependent, Object: fmt.Sprint("configmaps/ns/c", i)}
			}
			for i, obj := range tc.held {
				if obj == nil {
					if e.ShouldEnqueue("ns/a", nil, triggerOf(i)) {
						t.Error("a delete during the sync was enqueued at once")
					}
					continue
				}
				if e.ShouldEnqueue("ns/a", obj, triggerOf(i)) {
					t.Errorf("an event during the sync was enqueued at once")
				}
			}
			if !e.ShouldEnqueue("ns/other", version("u9", "1"), triggerOf(9)) {
				t.Error("an event of another key was held")
			}
			for _, w := range tc.writes {
				e.Expect("ns/a", w)
			}
			var want []trigger.Trigger
			for _, i := range tc.resync {
				want = append(want, triggerOf(i))
			}
			if got := e.End("ns/a"); !slices.Equal(got, want) {
				t.Errorf("End = %v, want %v", got, want)
			}
			// After End, events are judged at once again.
			e.Expect("ns/a", version("u1", "50"))
			if e.ShouldEnqueue("ns/a", version("u1", "50"), triggerOf(0)) {
				t.Error("an echo after End was enqueued")
			}
			if !e.ShouldEnqueue("ns/a", version("u1", "51"), triggerOf(0)) {
				t.Error("a change after End was not enqueued")
			}
		})
	}
}

// TestEchoIsOfTheKeyThatWrote: a write of the sync of one key is an echo
// only for an event queued for that key. The same event queued for another
// key (a child that is also of the parent resource, seen by the parents'
// handler as its own key, or an orphan queued for each candidate parent)
// is enqueued there, and leaves the echo expected for its own key.
func TestEchoIsOfTheKeyThatWrote(t *testing.T) {
	e := New[string]()
	e.Expect("ns/parent", version("child", "5"))
	if !e.ShouldEnqueue("ns/child", version("child", "5"), trigger.Trigger{}) {
		t.Error("the echo of ns/parent's write was taken for one of ns/child's")
	}
	if e.ShouldEnqueue("ns/parent", version("child", "5"), trigger.Trigger{}) {
		t.Error("the echo of ns/parent's write, queued for ns/parent after another key saw it, was enqueued")
	}
	// Held during a sync of another key, and judged at its End.
	e.Expect("ns/parent", version("child", "6"))
	e.Begin("ns/child")
	if e.ShouldEnqueue("ns/child", version("child", "6"), trigger.Trigger{Cause: trigger.CauseObject}) {
		t.Error("an event for a key being synced was enqueued at once")
	}
	if resync := e.End("ns/child"); len(resync) != 1 {
		t.Errorf("End of ns/child returned %v, want the event's trigger: it is not an echo of ns/child's sync", resync)
	}
	if e.ShouldEnqueue("ns/parent", version("child", "6"), trigger.Trigger{}) {
		t.Error("ns/parent's echo was consumed by ns/child's End")
	}
}

// TestForgetDropsExpectedEchoes: once an object is forgotten (deleted), a
// version of it that was expected is no longer an echo.
func TestForgetDropsExpectedEchoes(t *testing.T) {
	e := New[string]()
	e.Expect("ns/a", version("u1", "5"))
	e.Expect("ns/b", version("u2", "5"))
	e.Forget("u1")
	if n := expectedObjects(e); n != 1 {
		t.Errorf("%d objects expected after Forget, want 1", n)
	}
	if !e.ShouldEnqueue("ns/a", version("u1", "5"), trigger.Trigger{}) {
		t.Error("a forgotten write was taken for an echo")
	}
	if e.ShouldEnqueue("ns/b", version("u2", "5"), trigger.Trigger{}) {
		t.Error("Forget of one object dropped another's echo")
	}
}

// TestEchoesExpire: an echo that never came (the informer re-listed past
// it) is no echo after echoTTL, and is dropped from memory by later writes.
func TestEchoesExpire(t *testing.T) {
	e := New[string]()
	e.Expect("ns/a", version("old", "5"))
	e.Expect("ns/a", version("stale", "1"))
	e.mu.Lock()
	e.expected["old"]["5"] = expectation[string]{key: "ns/a", at: time.Now().Add(-echoTTL - time.Second)}
	e.expected["stale"]["1"] = expectation[string]{key: "ns/a", at: time.Now().Add(-echoTTL - time.Second)}
	e.mu.Unlock()
	if !e.ShouldEnqueue("ns/a", version("old", "5"), trigger.Trigger{}) {
		t.Error("an expected echo older than echoTTL was still taken for an echo")
	}
	// Writes of other objects expire it: memory stays bounded by what was
	// written in the last echoTTL.
	for i := range 1024 {
		e.Expect("ns/a", version(fmt.Sprintf("u%d", i), "1"))
	}
	e.mu.Lock()
	_, stale := e.expected["stale"]
	e.mu.Unlock()
	if stale {
		t.Error("an expected echo older than echoTTL is still remembered after 1024 writes")
	}
	if n := expectedObjects(e); n != 1024 {
		t.Errorf("%d objects expected, want the 1024 recent ones", n)
	}
}

// expectedObjects returns the number of objects with expected echoes.
func expectedObjects(e *Echoes[string]) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.expected)
}
