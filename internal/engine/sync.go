package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/status"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// sync brings the object queued as key, and its dependents, to what the
// hook wants. It is the whole reconcile, in order:
//
//  1. the object, from the cache; the finalizer decision
//  2. Controller.Observe: its children and claims, or attachments
//  3. related objects (customize hook)
//  4. rounds: the hook, its answer checked whole, the dependents written;
//     again until a fixed point (see MaxRounds); then the Events the
//     accepted answers ask for (hookEvents)
//  5. labels and annotations, then status, as the last answers ask
//  6. the finalizer removed once the finalize hook is done
//  7. a later sync: resyncAfterSeconds, or backoff when not settled
//
// A failed hook call or an invalid first answer writes nothing (but the
// metactl.io/Synced condition, when the controller opts in: see
// synced.go); the object gets a SyncError Event and the key is retried
// (recordSyncError).
func (e *Engine) sync(ctx context.Context, s *loop.Sync[Key]) (after time.Duration, err error) {
	key := s.Key
	// The sync's record (history): its triggers, calls, writes, outcome.
	ctx = e.beginRecord(ctx, s)
	gone := false
	defer func() { e.endRecord(ctx, s, gone, after, err) }()
	// The hook's answers count against the budget of answers in memory
	// until the sync is done writing them; the calls of a retry say so in
	// their spans.
	hold := hookclient.NewHold()
	defer hold.Release()
	calls := hookclient.CallOptions{Hold: hold, Retry: e.retried(ctx, s)}
	// Events for this object that arrive meanwhile are judged at the end,
	// once this sync's writes are known: echoes of them need no new sync.
	e.echoes.Begin(key)
	defer func() {
		for _, t := range e.echoes.End(key) {
			e.queue.AddFor(key, t)
		}
	}()

	// 1. The object, from the cache. A parent that is gone takes its
	// children with it through garbage collection.
	t, ok := e.target(key)
	if !ok {
		gone = true
		if e.related != nil {
			e.related.Forget(key)
		}
		e.unsettled.Settled(key)
		e.synced.forget(key)
		e.blockers.forget(key)
		return 0, nil
	}
	return e.syncTarget(ctx, s, calls, t)
}

// syncTarget is sync from step 1 on, for t, the object queued as s.Key,
// in the work queue's sync s (SyncOnce's own, outside the queue): the
// reconcile itself, shared by sync and SyncOnce. Its hook calls are made
// with calls (Target.calls).
func (e *Engine) syncTarget(ctx context.Context, s *loop.Sync[Key], calls hookclient.CallOptions, t *Target) (after time.Duration, err error) {
	ctx = e.prepareTarget(ctx, s, t)
	t.calls = calls
	// The objects its requests carry are counted, and held in the
	// process's budget, until the sync ends (CountRequest).
	t.request = e.newRequestHold()
	defer t.request.release()
	// The metactl.io/Synced condition, when the controller writes it.
	synced := e.synced.begin(t.Key, t)
	defer func() { synced.finish(ctx, t, err) }()
	if err := e.mayServe(ctx, t); err != nil {
		return 0, e.syncFailed(ctx, t, err)
	}
	if done, err := e.decideFinalizer(ctx, t); done || err != nil {
		if done {
			e.unsettled.Settled(t.Key)
		}
		if err != nil {
			// A refused finalizer write (the account of a controller
			// acting as one may not patch the object, say) is reported
			// on the object as any failed sync is.
			return 0, e.syncFailed(ctx, t, err)
		}
		return 0, nil
	}
	t.Manage = !finalizer.HeldByGarbageCollector(t.Object)

	// 2. What the object observes; the object itself counts first.
	if err := e.countObject(ctx, t); err != nil {
		return 0, e.syncFailed(ctx, t, err)
	}
	ks, observed, err := e.controller.Observe(ctx, t)
	if err != nil {
		return 0, e.syncFailed(ctx, t, err)
	}
	t.Observed = observed

	// 3. Related objects, for the round.
	r, err := e.newRound(ctx, t, ks)
	if err != nil {
		return 0, e.syncFailed(ctx, t, err)
	}

	// 4. The rounds.
	out := e.rounds(ctx, r)
	if out.answer == nil {
		return 0, e.syncFailed(ctx, t, out.err)
	}
	e.recordHookEvents(ctx, t.Object, &out.events)

	// 5 and 6. What the last answers ask of the object itself.
	if err := e.writeAnswered(ctx, t, synced, out); err != nil {
		return 0, e.syncFailed(ctx, t, err)
	}

	// 7. Again with backoff when the hook did not settle; a later sync
	// when it asked for one, no sooner than Options.MinResyncAfter.
	return e.unsettled.finish(t.Object, t.Key, out.settled, resyncDelay(out.resyncAfterSeconds, e.opts.minResyncAfter()), e.resyncAfter)
}

// mayServe returns why the controller may not be served the objects of
// t's namespace (Options.MayServe), or nil.
func (e *Engine) mayServe(ctx context.Context, t *Target) error {
	ns := t.Object.GetNamespace()
	if e.opts.MayServe == nil || ns == "" {
		return nil
	}
	if err := e.opts.MayServe(ctx, ns); err != nil {
		return fmt.Errorf("not served in namespace %s: %w", ns, err)
	}
	return nil
}

// prepareTarget readies t, the object queued as s.Key, for its sync in s:
// its key and queue sync set, the returned context's logger naming it and
// recording its hook calls when the controller records; for a built-in
// object whose status is in an annotation, t.Object shows that status as
// its own (statusView; a decorated object without the annotation shows
// its own .status, the status metacontroller would have answered into it).
func (e *Engine) prepareTarget(ctx context.Context, s *loop.Sync[Key], t *Target) context.Context {
	t.Key, t.queued = s.Key, s
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(t.Resource.Noun, klog.KObj(t.Object), "kind", t.Resource.Kind))
	ctx = e.withRecording(ctx, t)
	if StatusInAnnotation(t.Resource) {
		// A built-in object: the hook's status is in an annotation, which
		// the sync reads and writes as the object's status; a decorator's
		// hook is given the real one all the same (Target.forHook).
		_, recorded := t.Object.GetAnnotations()[StatusAnnotation]
		if t.Resource.HookGetsRealStatus() {
			t.realStatus = t.Object.Object["status"]
		}
		view, err := statusView(t.Object)
		if err != nil {
			klog.FromContext(ctx).Info("Ignoring the stored status", "err", err)
		}
		if !recorded && t.Resource.HookGetsRealStatus() {
			// A decorated object that has no annotation yet: its own
			// .status stands for the status last answered, as that is
			// where metacontroller writes a decorator's, so that an
			// answer it holds already is not written again.
			view = WithStatus(view, t.realStatus)
		}
		t.Object = view
	}
	return ctx
}

// newRound returns the first round of t's sync ks: the sync hook's, or
// the finalize hook's while t is finalizing, with t's related objects,
// keyed for the hook, when a customize hook declares them.
func (e *Engine) newRound(ctx context.Context, t *Target, ks Sync) (*Round, error) {
	r := &Round{e: e, t: t, sync: ks, observed: t.Observed, related: hooks.ObjectMap{}, hookName: "sync", hook: e.cfg.Hooks.Sync}
	if t.Finalizing {
		r.hookName, r.hook = "finalize", e.cfg.Hooks.Finalize
	}
	if e.related != nil {
		var err error
		count := func(ctx context.Context, objs []*informer.Object) error {
			return t.CountRequest(ctx, "related objects", objs)
		}
		if r.related, err = e.related.Related(ctx, t.queued, t.calls, t.Key, t.forHook(t.Object), t.Resource.Namespaced, *r.hook.Version, count); err != nil {
			return nil, fmt.Errorf("related objects: %w", err)
		}
	}
	return r, nil
}

// writeAnswered writes to t's object what the rounds' last answers (out)
// ask of it, even when some dependents failed: labels and annotations,
// then status, with the metactl.io/Synced condition synced reports; then,
// once the finalize hook is done and all else succeeded, the finalizer
// comes off. It returns the rounds' error and those of the writes, joined.
func (e *Engine) writeAnswered(ctx context.Context, t *Target, synced *syncedReport, out roundsResult) error {
	var errs []error
	if out.err != nil {
		errs = append(errs, out.err)
	}
	if err := e.patchMetadata(ctx, t, out.seen); err != nil {
		errs = append(errs, err)
	}
	if out.status != nil {
		status := synced.answered(ctx, t, out.status, errs, out.settled)
		if err := e.writeStatus(ctx, t, status, out.statusSeen); err != nil {
			errs = append(errs, err)
		}
	}
	if t.Finalizing && out.answer.Finalized && len(errs) == 0 {
		if err := e.setFinalizer(ctx, t, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// decideFinalizer makes the finalizer decision: an object being deleted or
// no longer selected is finalized when it carries the finalizer, else left
// alone (done); otherwise the finalizer goes on before the first sync
// while the controller has a finalize hook, so that a delete from then on
// waits for it, and a stale one (the controller no longer has a finalize
// hook) comes off.
func (e *Engine) decideFinalizer(ctx context.Context, t *Target) (done bool, err error) {
	obj := t.Object
	hasHook := e.cfg.Hooks.Finalize != nil
	has := hasHook && finalizer.Has(obj, e.cfg.Finalizer)
	switch {
	case obj.GetDeletionTimestamp() != nil || !t.Selected:
		if !has {
			// Not ours to manage any more: no finalize hook to run.
			return true, e.removeStaleFinalizer(ctx, t)
		}
		t.Finalizing = true
		return false, nil
	case hasHook && !has:
		return false, e.setFinalizer(ctx, t, true)
	default:
		return false, e.removeStaleFinalizer(ctx, t)
	}
}

// removeStaleFinalizer removes the finalizer this controller put on the
// object while it had a finalize hook, now that it has none; otherwise a
// deleted object would wait for a hook that is never called.
func (e *Engine) removeStaleFinalizer(ctx context.Context, t *Target) error {
	if e.cfg.Hooks.Finalize != nil {
		return nil
	}
	return e.setFinalizer(ctx, t, false)
}

// setFinalizer adds (or removes) the controller's finalizer on t's object,
// unless it has (lacks) it, and replaces t.Object with the object as
// written.
func (e *Engine) setFinalizer(ctx context.Context, t *Target, add bool) error {
	obj := t.Object
	var want []string
	var change bool
	if add {
		want, change = finalizer.Added(obj, e.cfg.Finalizer)
	} else {
		want, change = finalizer.Removed(obj, e.cfg.Finalizer)
	}
	if !change {
		return nil
	}
	patch, err := finalizer.Patch(obj, want)
	if err != nil {
		return err
	}
	written, err := e.objects.Patch(ctx, t.Resource.GroupVersionResource(), obj.GetNamespace(), obj.GetName(), types.MergePatchType, patch)
	if err != nil {
		history.Failed(ctx, "patch", "finalizer", t.Name(), err)
		return WriteFailed(fmt.Errorf("setting finalizers %v: %w", want, err))
	}
	history.Wrote(ctx, e.name, "patch", "finalizer", t.Name(), nil)
	e.echoes.Expect(t.Key, written)
	t.Object = withMetadata(obj, written)
	klog.FromContext(ctx).V(4).Info("Set finalizers", "finalizers", written.GetFinalizers())
	return nil
}

// Round is the state of the rounds of one sync: the object, what it
// observes, and the hook called.
type Round struct {
	e        *Engine
	t        *Target
	sync     Sync
	observed map[*children.Resource]children.Set
	related  hooks.ObjectMap
	hookName string
	hook     *v1alpha1.Hook
}

// Observed returns the dependents as the rounds' writes left them.
func (r *Round) Observed() map[*children.Resource]children.Set { return r.observed }

// Related returns the related objects of the sync.
func (r *Round) Related() hooks.ObjectMap { return r.related }

// HookName is "sync" or "finalize": the hook the rounds call.
func (r *Round) HookName() string { return r.hookName }

// ShortestResync returns the shorter of two resyncAfterSeconds, a value
// not above 0 asking for none.
func ShortestResync(a, b float64) float64 {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// Finalizing reports whether the rounds call the finalize hook (the
// request's "finalizing").
func (r *Round) Finalizing() bool { return r.t.Finalizing }

// Version is the version of the hook the rounds call, which keys the
// objects of its requests.
func (r *Round) Version() v1alpha1.HookVersion { return *r.hook.Version }

// Call calls the hook with request and decodes its answer into response,
// then reports the answer's unknown keys and refuses an answer without its
// list while the object has dependents (see Answers.CheckList), unless it
// is a finalize hook's, read as metacontroller reads it: the object is
// going away, or the garbage collector holds them.
func (r *Round) Call(ctx context.Context, request any, response hooks.Response) error {
	if err := r.e.hooks.Call(ctx, r.t.queued, r.hookName, r.hook, request, response, r.t.calls); err != nil {
		return err
	}
	answer := r.sync.Read(response)
	r.e.answers.reportUnknown(ctx, r.t.Object, r.hookName, answer.Unknown)
	if !r.t.Manage || r.t.Finalizing {
		return nil
	}
	return r.e.answers.CheckList(ctx, r.hookName, answer.ListAbsent, Count(r.observed), answer.Unknown)
}

// Write makes the dependents the desired ones (see children.Writer.Manage)
// and reports whether it wrote. The rounds' next call sees them as
// written.
func (r *Round) Write(ctx context.Context, desired map[*children.Resource]children.Set) (bool, error) {
	result, err := r.e.dependents.Manage(ctx, r.t.Object, r.e.controller.Dependents().Resources, r.observed, desired)
	if err != nil {
		return false, WriteFailed(err)
	}
	r.e.blockers.wait(r.t.Key, result.Blocked)
	r.observed = result.Observed
	return result.Wrote(), nil
}

// step is a round of a Sync that is not a Stepper: one hook call, its
// answer checked whole, then the dependents written, their echoes
// expected.
func (r *Round) step(ctx context.Context, seen *unstructured.Unstructured) (hooks.Response, bool, error) {
	dependents := hooks.ObjectMapOf(*r.hook.Version, r.t.Resource.Namespaced, r.e.controller.Dependents().Resources, r.observed)
	request, response := r.sync.Request(r.t.forHook(seen), dependents, r.related, r.t.Finalizing)
	if err := r.Call(ctx, request, response); err != nil {
		return nil, false, err
	}
	desired, err := r.sync.Desired(response)
	if err != nil {
		return nil, false, InvalidAnswer(fmt.Errorf("invalid %s hook response: %w", r.hookName, err))
	}
	if !r.t.Manage {
		// The garbage collector owns the dependents while it deletes the
		// object in the foreground or orphans them.
		return response, false, nil
	}
	result, err := r.e.dependents.Manage(ctx, r.t.Object, r.e.controller.Dependents().Resources, r.observed, desired)
	if err != nil {
		return response, false, WriteFailed(err)
	}
	r.e.blockers.wait(r.t.Key, result.Blocked)
	for _, obj := range result.Written {
		r.e.echoes.Expect(r.t.Key, obj)
	}
	r.observed = result.Observed
	return response, result.Wrote(), nil
}

// roundsResult is what the rounds of one sync leave to write.
type roundsResult struct {
	// answer is the last valid answer; nil when the first call failed or
	// its answer was invalid (nothing was written).
	answer *Answer
	// seen is the object as the last valid answer leaves it: its labels,
	// annotations and status.
	seen *unstructured.Unstructured
	// status is the status to write: the last that an answer asked for;
	// nil while every answer left it.
	status map[string]any
	// settled: the last answer was a fixed point.
	settled bool
	// resyncAfterSeconds is the shortest resyncAfterSeconds > 0 of the
	// valid answers, 0 when none asked for one: as with metacontroller,
	// where each of these calls is a sync of its own, a later answer
	// that asks for none does not cancel an earlier one's resync, and
	// the earliest wins (a delaying queue keeps a key's earliest time).
	resyncAfterSeconds float64
	// statusSeen: the hook was given the status it asked for last, so
	// that the status write's echo needs no sync.
	statusSeen bool
	// err is the error of a write or of a later call or answer.
	err error
	// events are the Events the valid answers asked for.
	events hookEvents
}

// rounds calls the hook and writes what it asks for, in rounds until the
// hook settles (see MaxRounds): after an answer that wrote dependents or
// asks for labels, annotations or a status other than those the hook was
// given, the hook is called again with the dependents as written and the
// object as the answer leaves it, as if written. An answer's conditions are
// completed (fillConditions) against the status the hook was given before
// that comparison. The object itself is
// written once, by the caller, from the last answers. With
// IgnoreStatusChanges, a status alone does not call for another round.
// A later call that fails or answers invalidly leaves the answers before
// it in force.
func (e *Engine) rounds(ctx context.Context, r *Round) roundsResult {
	stepper, _ := r.sync.(Stepper)
	out := roundsResult{seen: r.t.Object, statusSeen: true}
	for round := 1; round <= MaxRounds; round++ {
		var (
			response hooks.Response
			wrote    bool
			err      error
		)
		if stepper != nil {
			response, wrote, err = stepper.Step(ctx, r, out.seen)
		} else {
			response, wrote, err = r.step(ctx, out.seen)
		}
		if response == nil {
			out.err = err
			return out
		}
		answer := r.sync.Read(response)
		e.synced.keep(ctx, out.seen, &answer)
		e.fillConditions(r.t, out.seen, &answer)
		out.events.add(answer.Events)
		out.answer = &answer
		out.resyncAfterSeconds = ShortestResync(out.resyncAfterSeconds, answer.ResyncAfterSeconds)
		next, metadataChanged, statusChanged := asAnswered(out.seen, &answer)
		out.seen = next
		if answer.Status != nil {
			out.status = answer.Status
		}
		if err != nil {
			out.err = err
			return out
		}
		sameStatus := !statusChanged || r.t.Resource.IgnoreStatusChanges
		if !wrote && !metadataChanged && sameStatus {
			out.settled = true
			return out
		}
		if stepper != nil && wrote {
			// A Stepper's write ends the sync; when the hook was not
			// given the status it asks for, the status write's own event
			// syncs the object again.
			out.settled, out.statusSeen = true, sameStatus
			return out
		}
	}
	return out
}

// asAnswered returns obj as answer's labels, annotations and status leave
// it (a shallow copy; obj is not changed), and whether they change its
// labels or annotations, and its status.
func asAnswered(obj *unstructured.Unstructured, answer *Answer) (out *unstructured.Unstructured, metadataChanged, statusChanged bool) {
	apply := func(have map[string]string, changes map[string]*string) map[string]string {
		out := maps.Clone(have)
		for k, v := range changes {
			current, exists := out[k]
			switch {
			case v == nil && exists:
				delete(out, k)
				metadataChanged = true
			case v != nil && (!exists || current != *v):
				if out == nil {
					out = map[string]string{}
				}
				out[k] = *v
				metadataChanged = true
			}
		}
		return out
	}
	labels := apply(obj.GetLabels(), answer.Labels)
	annotations := apply(obj.GetAnnotations(), answer.Annotations)
	out = &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	if metadataChanged {
		meta, _ := obj.Object["metadata"].(map[string]any)
		out.Object["metadata"] = maps.Clone(meta)
		out.SetLabels(labels)
		out.SetAnnotations(annotations)
	}
	if answer.Status != nil {
		given, _ := obj.Object["status"].(map[string]any)
		statusChanged = !status.Equal(given, answer.Status)
		out.Object["status"] = answer.Status
	}
	return out, metadataChanged, statusChanged
}

// patchMetadata makes the labels and annotations of t's object those of
// want: it sets the keys want adds or changes and removes those it lacks,
// in one merge patch with the object's UID as precondition. It writes
// only when something changes.
func (e *Engine) patchMetadata(ctx context.Context, t *Target, want *unstructured.Unstructured) error {
	obj := t.Object
	changes := func(want, have map[string]string) map[string]any {
		out := map[string]any{}
		for k, v := range want {
			if current, exists := have[k]; !exists || current != v {
				out[k] = v
			}
		}
		for k := range have {
			if _, kept := want[k]; !kept {
				out[k] = nil
			}
		}
		return out
	}
	md := map[string]any{}
	if l := changes(want.GetLabels(), obj.GetLabels()); len(l) > 0 {
		md["labels"] = l
	}
	if a := changes(want.GetAnnotations(), obj.GetAnnotations()); len(a) > 0 {
		md["annotations"] = a
	}
	if len(md) == 0 {
		return nil
	}
	md["uid"] = obj.GetUID() // precondition: the same object
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	written, err := e.objects.Patch(ctx, t.Resource.GroupVersionResource(), obj.GetNamespace(), obj.GetName(), types.MergePatchType, patch)
	history.Wrote(ctx, e.name, "patch", "metadata", t.Name(), err)
	if err != nil {
		return WriteFailed(fmt.Errorf("patching labels and annotations: %w", err))
	}
	e.echoes.Expect(t.Key, written)
	t.Object = withMetadata(obj, written)
	klog.FromContext(ctx).V(4).Info("Patched labels and annotations", "patch", string(patch))
	return nil
}

// writeStatus replaces the status of t's object with want, unless that is
// what it already has. When seen, the hook was given want and the
// write's watch event, its echo, needs no sync; else it syncs the object
// again, so that the hook is given the status it asked for. An object of
// a built-in resource keeps it in StatusAnnotation instead
// (writeStatusAnnotation).
func (e *Engine) writeStatus(ctx context.Context, t *Target, want map[string]any, seen bool) error {
	if StatusInAnnotation(t.Resource) {
		return e.writeStatusAnnotation(ctx, t, want, seen)
	}
	obj := t.Object
	gvr := t.Resource.GroupVersionResource()
	patch := func(ctx context.Context, name string, pt types.PatchType, data []byte, subresources ...string) (metav1.Object, error) {
		return e.objects.Patch(ctx, gvr, obj.GetNamespace(), name, pt, data, subresources...)
	}
	written, err := status.Replace(ctx, patch, gvr.GroupResource(), obj, want, t.Resource.HasStatus)
	if err != nil {
		history.Failed(ctx, "patch", "status", t.Name(), err)
		return WriteFailed(err)
	}
	if written == nil {
		return nil
	}
	history.Wrote(ctx, e.name, "patch", "status", t.Name(), nil)
	if seen {
		e.echoes.Expect(t.Key, written)
	}
	e.warnPruned(ctx, t, want, written)
	t.Object = withMetadata(obj, written)
	t.Object.Object["status"] = want
	klog.FromContext(ctx).V(4).Info("Updated status")
	return nil
}

// withMetadata returns a shallow copy of obj with the resourceVersion,
// finalizers, labels and annotations of written, the metadata a write of
// obj returned; obj is not changed.
func withMetadata(obj *unstructured.Unstructured, written metav1.Object) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	meta, _ := obj.Object["metadata"].(map[string]any)
	out.Object["metadata"] = maps.Clone(meta)
	out.SetResourceVersion(written.GetResourceVersion())
	out.SetFinalizers(written.GetFinalizers())
	out.SetLabels(written.GetLabels())
	out.SetAnnotations(written.GetAnnotations())
	return out
}

// syncFailed reports a failed sync of t's object (recordSyncError) and returns
// err for the retry.
func (e *Engine) syncFailed(ctx context.Context, t *Target, err error) error {
	return recordSyncError(ctx, t.queued, e.opts.Recorder, t.Object, e.kindName, e.name, err)
}
