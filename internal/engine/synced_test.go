package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

func TestSyncReason(t *testing.T) {
	gr := schema.GroupResource{Resource: "things"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ReasonSynced},
		{fmt.Errorf("revision r: %w", &hookclient.StatusError{Code: 500}), ReasonHookFailed},
		{&hookclient.UnreachableError{Err: errors.New("refused")}, ReasonHookFailed},
		{&hookclient.ResponseError{Err: errors.New("not JSON")}, ReasonHookFailed},
		{&hookclient.ResponseError{Err: &hooks.EventsError{Err: errors.New("events[0].type")}}, ReasonInvalidAnswer},
		{fmt.Errorf("x: %w", &credentials.CredentialError{}), ReasonHookFailed},
		{&hookclient.BudgetError{}, ReasonHookBudgetFull},
		{fmt.Errorf("revision r: %w", &hookclient.BudgetError{}), ReasonHookBudgetFull},
		{InvalidAnswer(errors.New("invalid sync hook response: a Secret")), ReasonInvalidAnswer},
		{&refusedAnswerError{}, ReasonInvalidAnswer},
		{WriteFailed(errors.New("creating ConfigMap x: forbidden")), ReasonWriteFailed},
		{WriteFailed(apierrors.NewConflict(gr, "p", errors.New("changed"))), ReasonWriteFailed},
		{errNotSettled, ReasonWaiting},
		{fmt.Errorf("related objects: %w", errors.New("selector refused")), ReasonSyncFailed},
		// The first cause found in this order wins in a joined error.
		{errors.Join(WriteFailed(errors.New("labels")), &hookclient.StatusError{Code: 500}), ReasonHookFailed},
	} {
		if got := syncReason(tc.err); got != tc.want {
			t.Errorf("SyncReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	// The marks keep what callers test for.
	if !apierrors.IsConflict(WriteFailed(apierrors.NewConflict(gr, "p", errors.New("changed")))) {
		t.Error("a conflict marked WriteFailed is no longer a conflict")
	}
	if WriteFailed(nil) != nil || InvalidAnswer(nil) != nil {
		t.Error("a nil error marked is not nil")
	}
}

// TestSyncedMessageCutsTheError: the error a message quotes is at most
// maxSyncedError bytes, "..." included, cut at a character boundary.
func TestSyncedMessageCutsTheError(t *testing.T) {
	s := &syncedConditions{enabled: true, owner: "compositecontroller c"}
	r := &syncedReport{s: s, key: keyOf("p")}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	want, _ := r.decide(context.Background(), obj, errors.New(strings.Repeat("é", maxSyncedError)), false) // two bytes each
	msg, _ := want["message"].(string)
	quoted := strings.TrimPrefix(msg, s.owner+": ") // outside a loop: no attempt
	if !utf8.ValidString(quoted) || len(quoted) > maxSyncedError || !strings.HasSuffix(quoted, "...") {
		t.Errorf("the error quoted is %d bytes, valid UTF-8 %v, want at most %d ending in ...", len(quoted), utf8.ValidString(quoted), maxSyncedError)
	}
}

func TestSyncedPut(t *testing.T) {
	s := &syncedConditions{enabled: true}
	ctx := context.Background()
	cond := map[string]any{"type": SyncedConditionType, "status": "True", "reason": ReasonSynced}
	ready := map[string]any{"type": "Ready", "status": "True"}

	// The hook's own entry of the type is replaced; its others kept, in order.
	forged := map[string]any{"type": SyncedConditionType, "status": "False"}
	st := map[string]any{"a": 1, "conditions": []any{forged, ready}}
	got := s.put(ctx, st, cond)
	if want := map[string]any{"a": 1, "conditions": []any{cond, ready}}; !status.Equal(got, want) {
		t.Errorf("put = %v, want %v", got, want)
	}
	if st["conditions"].([]any)[0].(map[string]any)["status"] != "False" {
		t.Error("put changed the status it was given")
	}
	// No conditions: a list is made.
	if got := s.put(ctx, map[string]any{}, cond); !status.Equal(got, map[string]any{"conditions": []any{cond}}) {
		t.Errorf("put into no conditions = %v", got)
	}
	// Nothing to put and nothing to remove: the status as it is, no
	// empty list added (it would differ from the hook's).
	empty := map[string]any{"a": 1}
	if got := s.put(ctx, empty, nil); !status.Equal(got, empty) {
		t.Errorf("put nil = %v", got)
	}
	// Conditions that are not a list are the hook's, left alone.
	odd := map[string]any{"conditions": "ready"}
	if got := s.put(ctx, odd, cond); !status.Equal(got, odd) {
		t.Errorf("put into conditions that are not a list = %v", got)
	}
}

// TestSyncedKeepCopies: the condition keep puts into an answer is a copy:
// completing the answer's conditions in place (fillConditions) leaves the
// given object's, the cache's, as it was.
func TestSyncedKeepCopies(t *testing.T) {
	s := &syncedConditions{enabled: true}
	cached := map[string]any{"type": SyncedConditionType, "status": "True", "reason": ReasonSynced, "message": ""}
	given := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{cached}}}}
	answer := &Answer{Status: map[string]any{"x": int64(1)}}
	s.keep(context.Background(), given, answer)
	status.FillConditions(nil, answer.Status, 3, time.Now())
	if len(cached) != 4 {
		t.Errorf("the cached condition is now %v: the answer's completion changed it", cached)
	}
	if c := syncedCondition(answer.Status); c == nil || c["observedGeneration"] != int64(3) {
		t.Errorf("the answer's condition is %v, want it completed", c)
	}
}

// TestSyncedOwner: the controller a condition's message names.
func TestSyncedOwner(t *testing.T) {
	for msg, want := range map[string]string{
		"synced by compositecontroller hello":                                  "compositecontroller hello",
		"decoratorcontroller d: sync hook http://x: HTTP 500; attempt 2, next": "decoratorcontroller d",
		"sync hook http://x: HTTP 500":                                         "",
		"related objects: refused":                                             "",
		"":                                                                     "",
	} {
		if got := syncedOwner(msg); got != want {
			t.Errorf("syncedOwner(%q) = %q, want %q", msg, got, want)
		}
	}
	// Another controller's condition is left alone, whatever the sync.
	s := &syncedConditions{enabled: true, owner: "compositecontroller c"}
	r := &syncedReport{s: s, key: keyOf("p")}
	other := map[string]any{"type": SyncedConditionType, "status": "True", "reason": ReasonSynced, "message": "synced by decoratorcontroller d"}
	obj := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{other}}}}
	if want, change := r.decide(context.Background(), obj, errors.New("boom"), false); change {
		t.Errorf("decide over another controller's condition = %v, want no change", want)
	}
}

// TestSyncedDecide: the condition is rewritten when its status, reason or
// error changes, and not when only the attempt would, within
// SyncedRewriteInterval; conflicts and cancelled syncs change nothing.
func TestSyncedDecide(t *testing.T) {
	s := &syncedConditions{enabled: true, owner: "compositecontroller c"}
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "namespace": "ns", "generation": int64(2)}}}
	ctx := context.Background()
	r := &syncedReport{s: s, key: keyOf("ns/p")}

	want, change := r.decide(ctx, obj, nil, false)
	if !change || want["status"] != "True" || want["lastTransitionTime"] == nil || want["observedGeneration"] != int64(2) {
		t.Fatalf("decide(no condition, success) = %v, %v", want, change)
	}
	obj.Object["status"] = map[string]any{"conditions": []any{want}}
	if _, change := r.decide(ctx, obj, nil, false); change {
		t.Error("a success over Synced=True changes it")
	}
	obj.SetGeneration(3)
	if _, change := r.decide(ctx, obj, nil, false); !change {
		t.Error("a new generation does not change observedGeneration")
	}

	failed := &hookclient.StatusError{Code: 500, Hook: "sync"}
	want, change = r.decide(ctx, obj, failed, false)
	if !change || want["reason"] != ReasonHookFailed || want["message"] != "compositecontroller c: "+failed.Error() {
		t.Fatalf("decide(failure) = %v, %v (outside a loop: no attempt)", want, change)
	}
	s.wrote(r.key)
	withAttempt := map[string]any{}
	for k, v := range want {
		withAttempt[k] = v
	}
	withAttempt["message"] = "compositecontroller c: " + failed.Error() + "; attempt 1, next attempt at 2026-11-26T16:00:00Z"
	obj.Object["status"] = map[string]any{"conditions": []any{withAttempt}}
	if _, change := r.decide(ctx, obj, failed, false); change {
		t.Error("only the attempt changed, written a moment ago, yet rewritten")
	}
	s.mu.Lock()
	s.written[r.key] = s.written[r.key].Add(-SyncedRewriteInterval)
	s.mu.Unlock()
	if _, change := r.decide(ctx, obj, failed, false); !change {
		t.Error("only the attempt changed, SyncedRewriteInterval ago, and not rewritten")
	}
	s.wrote(r.key)
	other := &hookclient.StatusError{Code: 503, Hook: "sync"}
	if _, change := r.decide(ctx, obj, other, false); change {
		t.Error("another error of the same reason, written a moment ago, yet rewritten")
	}
	if want, change := r.decide(ctx, obj, other, true); !change || want["message"] != "compositecontroller c: "+other.Error() {
		t.Errorf("another error with the hook's status written anyway = %v, %v, want it carried", want, change)
	}
	if _, change := r.decide(ctx, obj, WriteFailed(errors.New("forbidden")), false); !change {
		t.Error("another reason is not written at once")
	}
	if _, change := r.decide(ctx, obj, WriteFailed(apierrors.NewConflict(schema.GroupResource{}, "p", errors.New("x"))), false); change {
		t.Error("a conflict changes the condition")
	}
	cancelled, cancel := context.WithCancelCause(ctx)
	cancel(loop.ErrStopped)
	if _, change := r.decide(cancelled, obj, loop.ErrStopped, false); change {
		t.Error("a cancelled sync changes the condition")
	}
	s.forget(r.key)
	if s.writtenRecently(r.key) {
		t.Error("forget kept the last write")
	}
}

// TestJoinedConflictHidesNothing: a conflict joined with another failure
// is reported (SyncError Event, the condition), only conflicts are not.
func TestJoinedConflictHidesNothing(t *testing.T) {
	conflict := WriteFailed(apierrors.NewConflict(schema.GroupResource{Resource: "things"}, "p", errors.New("changed")))
	joined := errors.Join(conflict, &hookclient.StatusError{Code: 500, Hook: "sync"})
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{conflict, true},
		{fmt.Errorf("status: %w", conflict), true},
		{errors.Join(conflict, conflict), true},
		{joined, false},
		{fmt.Errorf("x: %w", joined), false},
		{errors.New("other"), false},
		{nil, false},
	} {
		if got := onlyConflicts(tc.err); got != tc.want {
			t.Errorf("OnlyConflicts(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	recorder := record.NewFakeRecorder(10)
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p"}}}
	_ = recordSyncError(context.Background(), nil, recorder, obj, "compositecontroller", "c", joined)
	_ = recordSyncError(context.Background(), nil, recorder, obj, "compositecontroller", "c", conflict)
	if n := len(recorder.Events); n != 1 {
		t.Errorf("%d SyncError Events for a joined failure and a conflict, want 1", n)
	}
	r := &syncedReport{s: &syncedConditions{enabled: true, owner: "compositecontroller c"}, key: keyOf("p")}
	if want, change := r.decide(context.Background(), obj, joined, false); !change || want["reason"] != ReasonHookFailed {
		t.Errorf("decide(conflict joined with a hook failure) = %v, %v, want HookFailed", want, change)
	}
}
