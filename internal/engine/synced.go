package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/textcut"
	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// SyncedConditionType is the type of the condition in which metactl shows,
// on each object a controller syncs, how its last sync went, when the
// controller opts in (SyncedConditionAnnotation, Options.SyncedCondition).
const SyncedConditionType = "metactl.io/Synced"

// SyncedConditionAnnotation on a CompositeController or DecoratorController
// turns the SyncedConditionType condition on ("true") or off ("false") for
// that controller, whatever Options.SyncedCondition says. Status belongs to
// the hook: without either, metactl writes none of its own.
const SyncedConditionAnnotation = "metactl.io/synced-condition"

// SyncedRewriteInterval is the least time between two writes of one
// object's SyncedConditionType condition that keep its status, reason and
// observed generation (a new error text, attempt or next attempt); a
// change of those is written at once.
const SyncedRewriteInterval = 30 * time.Second

// maxSyncedError bounds the error quoted in the condition's message, in
// bytes ("..." included when it is cut).
const maxSyncedError = 1024

// syncReason returns the reason of the SyncedConditionType condition a sync
// that ended with err leads to: ReasonSynced for nil. The sync record
// (history.Outcome.Reason) uses it too.
func syncReason(err error) string {
	var (
		invalid     *invalidAnswerError
		refused     *refusedAnswerError
		events      *hooks.EventsError
		unreachable *hookclient.UnreachableError
		statusErr   *hookclient.StatusError
		response    *hookclient.ResponseError
		budget      *hookclient.BudgetError
		credential  *credentials.CredentialError
		write       *writeError
		tooLarge    *RequestTooLargeError
		noRoom      *RequestBudgetError
	)
	switch {
	case err == nil:
		return ReasonSynced
	case errors.As(err, &invalid), errors.As(err, &refused), errors.As(err, &events):
		// Before the hook's failures: invalid events come inside the
		// *hookclient.ResponseError of the call.
		return ReasonInvalidAnswer
	case errors.As(err, &budget):
		return ReasonHookBudgetFull
	case errors.As(err, &unreachable), errors.As(err, &statusErr), errors.As(err, &response),
		errors.As(err, &credential):
		return ReasonHookFailed
	case errors.As(err, &tooLarge):
		return ReasonRequestTooLarge
	case errors.As(err, &noRoom):
		return ReasonRequestBudget
	case errors.As(err, &write):
		return ReasonWriteFailed
	case errors.Is(err, loop.ErrWaiting):
		return ReasonWaiting
	default:
		return ReasonSyncFailed
	}
}

// validateSyncedConditionAnnotation checks the value of
// SyncedConditionAnnotation on a controller object: absent, "true" or
// "false".
func validateSyncedConditionAnnotation(annotations map[string]string) field.ErrorList {
	v, ok := annotations[SyncedConditionAnnotation]
	if !ok || v == "true" || v == "false" {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(SyncedConditionAnnotation), v, []string{"true", "false"})}
}

// syncedConditionEnabled says whether a controller object writes the
// condition: its annotation, else the default (Options.SyncedCondition).
func syncedConditionEnabled(obj *unstructured.Unstructured, def bool) bool {
	if v, ok := obj.GetAnnotations()[SyncedConditionAnnotation]; ok {
		return v == "true"
	}
	return def
}

// syncedConditions maintains the SyncedConditionType condition of one
// controller's objects. The condition is metactl's: it is kept in the
// status the hook answers (keep), so that it never counts as a change of
// the hook's and is never dropped by its status write; its new value goes
// with that write when there is one (syncedReport.answered), else alone in
// a JSON patch of status.conditions (syncedReport.finish). Safe for
// concurrent use.
type syncedConditions struct {
	e       *Engine
	enabled bool

	// owner names the controller, "<kind> <name>" as its SyncError
	// Events do: the condition's message names it, and a condition whose
	// message names another controller is that controller's, left alone
	// (the first writer owns it; see syncedOwner).
	owner string

	mu sync.Mutex
	// written is when each object's condition was last written, by
	// work-queue key; dropped when the object is gone.
	written map[Key]time.Time
	// warned: a status whose conditions are not a list was logged.
	warned atomic.Bool
	// dropped holds the resources (*Watched) whose objects keep no
	// status: the server dropped the condition (a custom resource whose
	// schema prunes it; a built-in object keeps it in StatusAnnotation).
	dropped sync.Map
}

// keep puts the condition the object was given (given's status's; none
// when it has none) into the status answer asks for, in place of any the
// hook answered, so that an answer that leaves the hook's status as it
// was compares equal to it: called on each answer before the fixed-point
// comparison.
func (s *syncedConditions) keep(ctx context.Context, given *unstructured.Unstructured, answer *Answer) {
	if s == nil || !s.enabled || answer.Status == nil {
		return
	}
	givenStatus, _ := given.Object["status"].(map[string]any)
	answer.Status = s.put(ctx, answer.Status, syncedCondition(givenStatus))
}

// put returns st with a copy of cond as its only condition of type
// SyncedConditionType (none when cond is nil): status.SetCondition. The
// copy matters: cond may be the cached object's (keep), and the status put
// returns is completed in place (fillConditions). Conditions that are not
// a list are the hook's: st is returned as it is (logged once per
// controller).
func (s *syncedConditions) put(ctx context.Context, st map[string]any, cond map[string]any) map[string]any {
	out, err := status.SetCondition(st, SyncedConditionType, cond)
	if err != nil && s.warned.CompareAndSwap(false, true) {
		klog.FromContext(ctx).V(2).Info("The "+SyncedConditionType+" condition is not written", "err", err)
	}
	return out
}

// syncedCondition returns the SyncedConditionType condition of st; nil when
// it has none.
func syncedCondition(st map[string]any) map[string]any {
	return status.FindCondition(st, SyncedConditionType)
}

// forget drops what is remembered of the object queued as key, gone.
func (s *syncedConditions) forget(key Key) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.written, key)
	s.mu.Unlock()
}

// forgetIf is forget of every object whose key forget reports.
func (s *syncedConditions) forgetIf(forget func(Key) bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.written {
		if forget(key) {
			delete(s.written, key)
		}
	}
}

// wrote records that the condition of the object queued as key was
// written now.
func (s *syncedConditions) wrote(key Key) {
	s.mu.Lock()
	if s.written == nil {
		s.written = map[Key]time.Time{}
	}
	s.written[key] = time.Now()
	s.mu.Unlock()
}

// writtenRecently reports whether the condition of the object queued as
// key was written less than SyncedRewriteInterval ago.
func (s *syncedConditions) writtenRecently(key Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.written[key]
	return ok && time.Since(at) < SyncedRewriteInterval
}

// begin starts the report of one sync of t's object, queued as key; nil
// when the controller does not write the condition.
func (s *syncedConditions) begin(key Key, t *Target) *syncedReport {
	if s == nil || !s.enabled {
		return nil
	}
	st, _ := t.Object.Object["status"].(map[string]any)
	return &syncedReport{s: s, key: key, queued: t.queued, start: syncedCondition(st)}
}

// syncedReport is the SyncedConditionType condition of one sync.
type syncedReport struct {
	s   *syncedConditions
	key Key
	// queued is the work queue's sync (Target.queued), nil outside it.
	queued *loop.Sync[Key]
	// start is the condition the object had when the sync began.
	start map[string]any
	// The retry, asked of the work queue once per sync.
	retryAsked bool
	attempt    int
	next       time.Time
	retryKnown bool
}

// retry returns the attempt and the time of the next attempt of a sync
// failing with err; false outside a work queue's sync.
func (r *syncedReport) retry(err error) (int, time.Time, bool) {
	if !r.retryAsked {
		r.retryAsked = true
		var delay time.Duration
		delay, r.attempt, r.retryKnown = r.queued.Retry(err)
		r.next = time.Now().Add(delay)
	}
	return r.attempt, r.next, r.retryKnown
}

// decide returns the condition obj should carry after a sync that ended
// with err, and whether it should be written now: when its status or
// reason changed, or its observed generation; any other change (the
// error in its message, the attempt, the next attempt) only when
// SyncedRewriteInterval has passed since the last write, or when the
// status is written anyway (free: the hook's status write carries it). A
// conflict (the retry resolves it) or a cancelled sync changes nothing,
// nor does anything change a condition another controller owns.
func (r *syncedReport) decide(ctx context.Context, obj *unstructured.Unstructured, err error, free bool) (map[string]any, bool) {
	if err != nil && (onlyConflicts(err) || ctx.Err() != nil) {
		return nil, false
	}
	st, _ := obj.Object["status"].(map[string]any)
	if v := st["conditions"]; v != nil {
		if _, ok := v.([]any); !ok {
			return nil, false
		}
	}
	cur := syncedCondition(st)
	if curMsg, _ := cur["message"].(string); cur != nil {
		if owner := syncedOwner(curMsg); owner != "" && owner != r.s.owner {
			return nil, false // another controller's: first writer owns it
		}
	}
	want := map[string]any{"type": SyncedConditionType, "status": "True", "reason": ReasonSynced, "message": syncedByPrefix + r.s.owner}
	if err != nil {
		msg := r.s.owner + ": " + textcut.Cut(err.Error(), maxSyncedError)
		if attempt, next, ok := r.retry(err); ok {
			msg += fmt.Sprintf("; attempt %d, next attempt at %s", attempt, next.UTC().Truncate(time.Second).Format(time.RFC3339))
		}
		want["status"], want["reason"], want["message"] = "False", syncReason(err), msg
	}
	status.FillConditions(st, map[string]any{"conditions": []any{want}}, obj.GetGeneration(), time.Now())
	if cur != nil {
		// A filled field counts only where the object's condition has it
		// (status.Unkept): a status schema may prune them.
		bare := status.Unkept(cur, want, status.FilledFields)
		if status.Equal(cur, bare) {
			return nil, false
		}
		if !free && cur["status"] == bare["status"] && cur["reason"] == bare["reason"] &&
			generationOf(cur["observedGeneration"]) == generationOf(bare["observedGeneration"]) &&
			r.s.writtenRecently(r.key) {
			return nil, false
		}
	}
	return want, true
}

// syncedByPrefix starts the message of a True SyncedConditionType
// condition: "synced by <kind> <name>".
const syncedByPrefix = "synced by "

// controllerKinds are the kinds of controller a SyncedConditionType
// condition's message can name (Engine.kindName).
var controllerKinds = []string{"compositecontroller", "decoratorcontroller"}

// syncedOwner returns the controller ("<kind> <name>") a
// SyncedConditionType condition's message names: "synced by <kind> <name>"
// (True) or "<kind> <name>: <error>..." (False); "" when it names none.
func syncedOwner(msg string) string {
	if owner, ok := strings.CutPrefix(msg, syncedByPrefix); ok {
		return owner
	}
	head, _, ok := strings.Cut(msg, ": ")
	if !ok {
		return ""
	}
	kind, name, ok := strings.Cut(head, " ")
	if !ok || name == "" || strings.Contains(name, " ") || !slices.Contains(controllerKinds, kind) {
		return ""
	}
	return head
}

// generationOf reads an observedGeneration as JSON gives it.
func generationOf(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

// answered returns the status a sync writes for the hook, st, with the
// condition the sync leads to so far: errs are its failures until then,
// and settled says whether the hook reached a fixed point (else the sync
// is waiting). The status write then carries the condition, when it
// changes, and finish writes nothing more unless the sync fails later.
func (r *syncedReport) answered(ctx context.Context, t *Target, st map[string]any, errs []error, settled bool) map[string]any {
	if r == nil {
		return st
	}
	err := errors.Join(errs...)
	if err == nil && !settled {
		err = errNotSettled
	}
	// A status that differs from the object's is written anyway: it
	// carries the condition as it is now, attempt and all.
	have, _ := t.Object.Object["status"].(map[string]any)
	want, change := r.decide(ctx, t.Object, err, !status.Equal(have, st))
	if !change {
		return st
	}
	return r.s.put(ctx, st, want)
}

// finish writes the condition a sync of t's object that ended with err
// leads to, unless the object has it already (see decide): alone, in a
// JSON patch of status.conditions. A sync cancelled, or of an object the
// controller leaves alone (deleted or no longer selected, without its
// finalizer), writes nothing. A failed write is logged; the next sync
// tries again.
func (r *syncedReport) finish(ctx context.Context, t *Target, err error) {
	if r == nil || ctx.Err() != nil {
		return
	}
	if (t.Object.GetDeletionTimestamp() != nil || !t.Selected) && !t.Finalizing {
		return
	}
	if _, dropped := r.s.dropped.Load(t.Resource); dropped {
		return
	}
	st, _ := t.Object.Object["status"].(map[string]any)
	if now := syncedCondition(st); now != nil && (r.start == nil || !status.Equal(now, r.start)) {
		// The hook's status write carried it.
		r.s.wrote(r.key)
	}
	want, change := r.decide(ctx, t.Object, err, false)
	if !change {
		return
	}
	if werr := r.s.e.patchSynced(ctx, t, want); werr != nil {
		klog.FromContext(ctx).V(2).Info("Writing the "+SyncedConditionType+" condition failed; the next sync tries again", "err", werr)
		return
	}
	r.s.wrote(r.key)
}

// patchSynced makes cond the SyncedConditionType condition of t's object,
// touching nothing else of its status (status.PatchConditions): with the
// object's UID and its status.conditions as the cache has them as
// preconditions, through the status subresource when the resource has one.
// An object changed meanwhile (a conflict) or gone is not written: its
// watch event syncs it again. The write's own event is expected as an
// echo.
func (e *Engine) patchSynced(ctx context.Context, t *Target, cond map[string]any) error {
	obj := t.Object
	st, _ := obj.Object["status"].(map[string]any)
	newStatus := e.synced.put(ctx, st, cond)
	if StatusInAnnotation(t.Resource) {
		return e.writeStatusAnnotation(ctx, t, newStatus, true)
	}
	gvr := t.Resource.GroupVersionResource()
	patch := func(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
		return e.objects.Patch(ctx, gvr, obj.GetNamespace(), name, pt, data, subresources...)
	}
	written, err := status.PatchConditions(ctx, patch, gvr.GroupResource(), obj, newStatus, t.Resource.HasStatus)
	switch {
	case apierrors.IsConflict(err):
		history.Failed(ctx, "patch", "status", t.Name(), err)
		klog.FromContext(ctx).V(4).Info("Not writing the "+SyncedConditionType+" condition: the object changed", "err", err)
		return nil
	case err != nil:
		history.Failed(ctx, "patch", "status", t.Name(), err)
		return err
	case written == nil:
		return nil // gone, or its status is not an object
	}
	history.Wrote(ctx, e.name, "patch", "status", t.Name(), nil)
	if !keepsCondition(written) {
		// The server dropped the condition: the resource keeps no status.
		if _, logged := e.synced.dropped.LoadOrStore(t.Resource, true); !logged {
			klog.FromContext(ctx).Info("The resource keeps no status: its objects get no "+SyncedConditionType+" condition", "resource", gvr)
		}
		return nil
	}
	e.echoes.Expect(t.Key, written)
	t.Object = withMetadata(obj, written)
	t.Object.Object["status"] = newStatus
	klog.FromContext(ctx).V(4).Info("Updated the "+SyncedConditionType+" condition", "status", cond["status"], "reason", cond["reason"])
	return nil
}

// keepsCondition reports whether written, an object as the write of its
// SyncedConditionType condition returned it, has the condition: a
// resource whose objects keep no status (a custom resource whose schema
// prunes it) drops it.
func keepsCondition(written metav1.Object) bool {
	st, known := writtenStatus(written)
	return !known || syncedCondition(st) != nil
}

// writtenStatus returns the status of written, an object as a write
// returned it (an informer.Object decodes only its status); known is false
// when that cannot be told (a writer that returns metadata only, or JSON
// that does not decode).
func writtenStatus(written metav1.Object) (status map[string]any, known bool) {
	w, ok := written.(interface {
		Status() (map[string]any, error)
	})
	if !ok {
		return nil, false
	}
	st, err := w.Status()
	if err != nil {
		return nil, false
	}
	return st, true
}
