package hooktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/jsondiff"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/hooks"
)

// observedSet is the children (attachments) a request carries, by
// declared resource.
type observedSet = map[*children.Resource]children.Set

// answered is a valid answer to a sync (finalize) request.
type answered struct {
	answer  engine.Answer
	desired observedSet
}

// run sends the requests and checks the answers.
func (t *tester) run(ctx context.Context, parent *unstructured.Unstructured) error {
	if t.parentRes.HookGetsRealStatus() {
		t.ownStatus = parent.Object["status"]
	}
	sync, err := t.kind.Offline(parent)
	if err != nil {
		return &SetupError{Err: fmt.Errorf("no sync request can be built for the parent, as metactl could not sync it: %w", err)}
	}
	related := t.relatedObjects(ctx, parent)
	empty := observedSet{}
	for _, res := range t.kind.Dependents().Resources {
		empty[res] = children.Set{}
	}
	t.sendRelatedEmpty(ctx, sync, parent, empty, related)
	seen, observed, failed := t.syncRounds(ctx, sync, parent, empty, related)
	t.sendChildDeleting(ctx, sync, seen, observed, related.rounds, failed)
	t.finalizeRequests(ctx, seen, observed, empty, related.rounds)
	return nil
}

// relatedSets are the related objects the sync requests carry.
type relatedSets struct {
	// empty is none without a customize hook (as the engine sends them);
	// with one, an empty entry per related resource it declares.
	empty hooks.ObjectMap
	// rounds is what the rounds of a sync carry: with a usable answer of
	// the customize hook, a related object per related resource; else
	// empty.
	rounds hooks.ObjectMap
	// usable tells whether the customize hook's answer could be used.
	usable bool
}

// relatedObjects calls the customize hook, if any, with parent and
// returns the related objects of the sync requests.
func (t *tester) relatedObjects(ctx context.Context, parent *unstructured.Unstructured) relatedSets {
	if t.customize == nil {
		return relatedSets{empty: hooks.ObjectMap{}, rounds: hooks.ObjectMap{}}
	}
	empty, present := t.customizeRequests(ctx, parent)
	if empty == nil {
		empty = hooks.ObjectMap{}
	}
	if present == nil {
		return relatedSets{empty: empty, rounds: empty}
	}
	return relatedSets{empty: empty, rounds: present, usable: true}
}

// sendRelatedEmpty sends, with a customize hook, the sync request of
// parent with no children (empty) and an empty entry per related
// resource; skipped when the customize hook's answer could not be used.
func (t *tester) sendRelatedEmpty(ctx context.Context, sync engine.Sync, parent *unstructured.Unstructured, empty observedSet, related relatedSets) {
	if t.customize == nil {
		return
	}
	q := &Request{Hook: "sync", Name: "related-empty", Description: "the parent without status, no children, no related objects (an empty entry per related resource)"}
	if !related.usable {
		q.Skipped = "the customize hook's answer could not be used"
		t.report.Requests = append(t.report.Requests, *q)
		return
	}
	t.send(ctx, q, sync, "sync", t.sync, parent, empty, related.empty, false)
}

// syncRounds plays the rounds of one sync of parent, from the children
// observed, as the reconciler plays them: the hook is given its own
// children, as written, and the status it asked for, until it asks for
// no change. It returns the parent and children of the last round, and
// whether a request failed.
func (t *tester) syncRounds(ctx context.Context, sync engine.Sync, parent *unstructured.Unstructured, observed observedSet, related relatedSets) (
	*unstructured.Unstructured, observedSet, bool) {
	out := t.rounds(ctx, sync, "sync", t.sync, parent, observed, related.rounds, func(round int) *Request {
		return roundRequest(round, related.usable)
	})
	if !out.failed && !out.settled {
		// The last request sent is the last round's.
		q := &t.report.Requests[len(t.report.Requests)-1]
		t.report.add(Warning, CheckNotFixedPoint, "sync", q.Name,
			fmt.Sprintf("still asking for changes after %d calls, each given what the last one asked for (metactl syncs such a parent again and again, with backoff)", engine.MaxRounds), out.changes)
		q.OK = false
	}
	return out.seen, out.observed, out.failed
}

// roundsResult is what the rounds of one sync (rounds) leave.
type roundsResult struct {
	// seen and observed are the parent and children of the last round.
	seen     *unstructured.Unstructured
	observed observedSet
	// last is the last valid answer (nil when none).
	last *answered
	// failed: a request failed (its finding is reported).
	failed bool
	// settled: the last answer asked for no change (a fixed point).
	settled bool
	// changes are what the last answer changed, when not settled.
	changes []jsondiff.Change
	// calls is the number of rounds played.
	calls int
}

// rounds plays the rounds of one sync (finalize: while the parent is
// being deleted) of parent as the engine's rounds play them (at most
// engine.MaxRounds calls): each answer's children are written over
// observed (write) and its status and metadata applied to the parent
// (engine.AsAnswered), and the hook is called again with both, until an
// answer asks for no change. request names the request of each round
// (from 1).
func (t *tester) rounds(ctx context.Context, sync engine.Sync, hookName string, hook *v1alpha1.Hook,
	parent *unstructured.Unstructured, observed observedSet, related hooks.ObjectMap, request func(round int) *Request) roundsResult {
	out := roundsResult{seen: parent, observed: observed}
	finalizing := hookName == "finalize"
	for round := 1; round <= engine.MaxRounds; round++ {
		q := request(round)
		out.calls = round
		a := t.send(ctx, q, sync, hookName, hook, out.seen, out.observed, related, finalizing)
		if a == nil {
			out.failed = true
			return out
		}
		out.last = a
		next, metadataChanged, statusChanged := engine.AsAnswered(out.seen, &a.answer)
		nextObserved, wrote, childChanges, err := t.write(out.observed, a.desired, round)
		if err != nil {
			// The reconciler's sync fails with this error, writing
			// nothing of the answer.
			t.report.add(Error, CheckInvalidChildren, hookName, q.Name, err.Error(), nil)
			t.report.Requests[len(t.report.Requests)-1].OK = false
			out.failed = true
			return out
		}
		if !wrote && !metadataChanged && (!statusChanged || t.parentRes.IgnoreStatusChanges) {
			out.settled = true
			return out
		}
		out.changes = append(childChanges, parentChanges(out.seen, next)...)
		out.seen, out.observed = next, nextObserved
	}
	return out
}

// roundRequest is the request of a round of a sync (from 1), with a
// related object per related resource when relatedObjects.
func roundRequest(round int, relatedObjects bool) *Request {
	if round > 1 {
		return &Request{Hook: "sync", Name: fmt.Sprintf("own-children-%d", round-1), Description: "its own children and status, as metactl hands them back"}
	}
	q := &Request{Hook: "sync", Name: "no-children", Description: "the parent without status, no children (an empty entry per resource)"}
	if relatedObjects {
		q.Description += ", a related object per related resource"
	}
	return q
}

// parentChanges are the changes of the parent's status, labels and
// annotations from seen to next.
func parentChanges(seen, next *unstructured.Unstructured) []jsondiff.Change {
	changes := prefixed(".status", jsondiff.Diff(seen.Object["status"], next.Object["status"]))
	changes = append(changes, prefixed(".metadata.labels", jsondiff.Diff(anyMap(seen.GetLabels()), anyMap(next.GetLabels())))...)
	return append(changes, prefixed(".metadata.annotations", jsondiff.Diff(anyMap(seen.GetAnnotations()), anyMap(next.GetAnnotations())))...)
}

// sendChildDeleting sends the sync request of seen with its own children
// (observed), one being deleted; skipped when it has none or an earlier
// request failed.
func (t *tester) sendChildDeleting(ctx context.Context, sync engine.Sync, seen *unstructured.Unstructured, observed observedSet, related hooks.ObjectMap, failed bool) {
	q := &Request{Hook: "sync", Name: "child-deleting", Description: "its own children, one being deleted (deletionTimestamp set)"}
	if deleting, ok := withDeleting(observed); ok && !failed {
		t.send(ctx, q, sync, "sync", t.sync, seen, deleting, related, false)
		return
	}
	q.Skipped = "no children to delete: the hook asked for none, or an earlier request failed"
	t.report.Requests = append(t.report.Requests, *q)
}

// finalizeRequests plays, with a finalize hook, the finalize syncs of
// seen being deleted as the engine plays them (rounds): from its own
// children (observed), if any, and from none (empty); in each, the
// children the hook asks for are written and handed back to it, and its
// last answer must be finalized: true (the engine removes its finalizer
// on that answer; a hook that settles without it waits for an event that,
// with everything written, does not come).
func (t *tester) finalizeRequests(ctx context.Context, seen *unstructured.Unstructured, observed, empty observedSet, related hooks.ObjectMap) {
	if t.finalize == nil {
		t.report.Requests = append(t.report.Requests, Request{Hook: "finalize", Name: "finalizing", Description: "finalizing: true", Skipped: "the controller has no finalize hook"})
		return
	}
	deleted := seen.DeepCopy()
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
	deleted.SetDeletionTimestamp(&now)
	deleted.SetFinalizers(append(deleted.GetFinalizers(), t.kind.Finalizer()))
	fsync, err := t.kind.Offline(deleted)
	if err != nil {
		t.report.Requests = append(t.report.Requests, Request{Hook: "finalize", Name: "finalizing", Description: "finalizing: true", Skipped: err.Error()})
		return
	}
	// Keyed for the finalize hook's version, as the engine keys them.
	finalizeRelated := related.Rekeyed(*t.finalize.Version, t.parentRes.Namespaced)
	if engine.Count(observed) > 0 {
		t.finalizeRounds(ctx, fsync, deleted, observed, finalizeRelated, "finalizing-children", "finalizing: true, the parent being deleted, its own children")
	}
	t.finalizeRounds(ctx, fsync, deleted, empty, finalizeRelated, "finalizing-no-children", "finalizing: true, the parent being deleted, no children left")
}

// finalizeRounds plays the rounds of a finalize sync from observed, its
// requests named name, name-2, ..., and reports a last answer that is not
// finalized.
func (t *tester) finalizeRounds(ctx context.Context, fsync engine.Sync, deleted *unstructured.Unstructured, observed observedSet, related hooks.ObjectMap, name, description string) {
	out := t.rounds(ctx, fsync, "finalize", t.finalize, deleted, observed, related, func(round int) *Request {
		if round == 1 {
			return &Request{Hook: "finalize", Name: name, Description: description}
		}
		return &Request{Hook: "finalize", Name: fmt.Sprintf("%s-%d", name, round), Description: "finalizing: true, the children and status the last answer asked for, as metactl hands them back"}
	})
	if out.failed || out.last.answer.Finalized {
		return
	}
	q := &t.report.Requests[len(t.report.Requests)-1]
	msg := fmt.Sprintf("the parent being deleted, from %s, the last answer does not have \"finalized\": true", strings.TrimPrefix(description, "finalizing: true, the parent being deleted, "))
	if out.settled {
		msg += fmt.Sprintf(" and asks for no change (after %d calls, each given the children as the last one left them): the parent would never go", out.calls)
	} else {
		msg += fmt.Sprintf(" after %d calls, each given the children as the last one left them", engine.MaxRounds)
	}
	t.report.add(Error, CheckNotFinalized, "finalize", q.Name, msg, nil)
	q.OK = false
}

// send sends the request the reconciler's sync makes of seen, observed
// and related, twice, and checks the answers as the reconciler does; nil
// when the first answer is not valid.
func (t *tester) send(ctx context.Context, q *Request, sync engine.Sync, hookName string, hook *v1alpha1.Hook,
	seen *unstructured.Unstructured, observed observedSet, related hooks.ObjectMap, finalizing bool) *answered {
	before := len(t.report.Findings) + countRequests(t.report.Findings)
	defer func() {
		q.OK = len(t.report.Findings)+countRequests(t.report.Findings) == before
		t.report.Requests = append(t.report.Requests, *q)
	}()
	dependents := hooks.ObjectMapOf(*hook.Version, t.parentRes.Namespaced, t.kind.Dependents().Resources, observed)
	if t.parentRes.HookGetsRealStatus() {
		// As the engine gives it: the object's own status, not the one
		// the hook answered.
		seen = engine.WithStatus(seen, t.ownStatus)
	}
	request, response := sync.Request(seen, dependents, related, finalizing)
	_, again := sync.Request(seen, dependents, related, finalizing)
	first := t.do(ctx, hookName, hook, request, response)
	second := t.do(ctx, hookName, hook, request, again)
	q.Sent = 2
	q.Milliseconds = max(first.d, second.d).Milliseconds()
	t.compare(hookName, q.Name, first, second)
	if first.err != nil {
		t.classify(ctx, hookName, hook, q.Name, first, response)
		return nil
	}
	if second.err != nil {
		t.classify(ctx, hookName, hook, q.Name, second, again)
	}
	answer := sync.Read(response)
	if len(answer.Unknown) > 0 {
		keys := make([]string, len(answer.Unknown))
		for i, f := range answer.Unknown {
			keys[i] = f.String()
		}
		t.report.add(Warning, CheckUnknownFields, hookName, q.Name, "unknown top-level keys, which metactl ignores (loose mode): "+strings.Join(keys, ", "), nil)
	}
	if !finalizing {
		if err := t.answers.CheckList(ctx, hookName, answer.ListAbsent, engine.Count(observed), answer.Unknown); err != nil {
			t.report.add(Error, CheckAbsentList, hookName, q.Name, err.Error(), nil)
			return nil
		}
	}
	desired, err := sync.Desired(response)
	if err != nil {
		errs := []error{err}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = joined.Unwrap()
		}
		for _, e := range errs {
			t.report.add(Error, CheckInvalidChildren, hookName, q.Name, e.Error(), nil)
		}
		return nil
	}
	return &answered{answer: answer, desired: desired}
}

// countRequests counts the requests named by findings, so that a finding
// merged into an existing one still counts as new.
func countRequests(fs []Finding) int {
	n := 0
	for _, f := range fs {
		n += len(f.Requests)
	}
	return n
}

// compare reports two answers to the same request that differ. Lists of
// children and attachments compare as sets (jsondiff.ByObjectKey).
func (t *tester) compare(hookName, request string, a, b call) {
	if a.body == nil || b.body == nil {
		return
	}
	va, okA := decodeAnswer(a.body)
	vb, okB := decodeAnswer(b.body)
	if !okA || !okB {
		if !bytes.Equal(a.body, b.body) {
			t.report.add(Error, CheckNondeterministic, hookName, request, "two answers to the same request differ", nil)
		}
		return
	}
	if changes := jsondiff.Diff(va, vb); len(changes) > 0 {
		t.report.add(Error, CheckNondeterministic, hookName, request, "two answers to the same request differ (first -> second)", changes)
	}
}

// decodeAnswer decodes an answer for comparison, its lists of objects as
// sets.
func decodeAnswer(body []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if m, ok := v.(map[string]any); ok {
		for _, key := range []string{"children", "attachments"} {
			if list, ok := m[key].([]any); ok {
				m[key], _ = jsondiff.ByObjectKey(list)
			}
		}
	}
	return v, true
}

// write plays the reconciler's write of desired over observed, child by
// child as children.Decide says (children.Writer.Manage's choice): those
// missing are created; those not desired deleted; the others, per their
// resource's update method, updated in place (the three-way merge), or
// deleted to be created again by a later round (Recreate), or kept
// (OnDelete); a child being deleted is left as it is. It returns the
// children as the next request carries them, whether anything was
// written, and the changes; an error as Manage reports it when a merge
// fails.
func (t *tester) write(observed, desired observedSet, round int) (observedSet, bool, []jsondiff.Change, error) {
	out := observedSet{}
	wrote := false
	var changes []jsondiff.Change
	for i, res := range t.kind.Dependents().Resources {
		have, want := observed[res], desired[res]
		set := maps.Clone(have)
		if set == nil {
			set = children.Set{}
		}
		keys := slices.Collect(maps.Keys(have))
		for key := range want {
			if _, ok := have[key]; !ok {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		for _, key := range keys {
			o, d := have[key], want[key]
			path := fmt.Sprintf(".%s[%q]", t.answers.List, res.Kind+" "+key)
			action, merged, err := children.Decide(res.Method, o, d)
			if err != nil {
				return nil, false, nil, fmt.Errorf("merging %s %s: %w", res.Kind, key, err)
			}
			switch action {
			case children.Create:
				if err := children.CheckName(res, d.GetName()); err != nil {
					// The writer refuses it before the API server would.
					return nil, false, nil, fmt.Errorf("%s: %w", path, err)
				}
				set[key] = created(d, fmt.Sprintf("%d-%d-%s", round, i, key))
				changes = append(changes, jsondiff.Change{Path: path, Op: jsondiff.Add, New: d.Object})
			case children.Update:
				merged.SetResourceVersion(fmt.Sprint(round + 1))
				set[key] = merged
				changes = append(changes, prefixed(path, jsondiff.Diff(o.Object, merged.Object))...)
			case children.Recreate:
				delete(set, key)
				changes = append(changes, prefixed(path, jsondiff.Diff(o.Object, merged.Object))...)
			case children.Delete:
				delete(set, key)
				changes = append(changes, jsondiff.Change{Path: path, Op: jsondiff.Remove, Old: o.Object})
			default: // None, Kept: nothing written
				continue
			}
			wrote = true
		}
		out[res] = set
	}
	return out, wrote, changes, nil
}

// created is desired as the API server returns it once created: with
// the last-applied annotation metactl writes, a uid, resourceVersion,
// generation and creationTimestamp.
func created(desired *unstructured.Unstructured, seed string) *unstructured.Unstructured {
	obj := desired.DeepCopy()
	_ = apply.SetLastApplied(obj, desired.Object)
	obj.SetUID(types.UID(fakeChildUID(seed)))
	obj.SetResourceVersion("1")
	obj.SetGeneration(1)
	obj.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	return obj
}

// fakeChildUID makes a UID-shaped string from seed, the same for the
// same seed.
func fakeChildUID(seed string) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(seed); i++ {
		h = (h ^ uint64(seed[i])) * 1099511628211
	}
	return fmt.Sprintf("7e57c41d-%04x-4%03x-8%03x-%012x", h>>48&0xffff, h>>36&0xfff, h>>24&0xfff, h&0xffffffffffff)
}

// withDeleting returns observed with its first child (by resource, then
// key) being deleted; false when there is none.
func withDeleting(observed observedSet) (observedSet, bool) {
	out := observedSet{}
	done := false
	resources := slices.SortedFunc(maps.Keys(observed), func(a, b *children.Resource) int {
		return strings.Compare(a.APIVersion+"/"+a.Name, b.APIVersion+"/"+b.Name)
	})
	for _, res := range resources {
		set := maps.Clone(observed[res])
		if !done && len(set) > 0 {
			key := slices.Sorted(maps.Keys(set))[0]
			obj := set[key].DeepCopy()
			now := metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
			obj.SetDeletionTimestamp(&now)
			obj.SetFinalizers(append(obj.GetFinalizers(), "metactl.io/hook-test"))
			set[key] = obj
			done = true
		}
		out[res] = set
	}
	return out, done
}

// customizeRequests calls the customize hook (twice) with the parent and
// checks its answer; it returns the related objects of its rules, empty
// and with one made-up object each (nil when the answer is unusable).
func (t *tester) customizeRequests(ctx context.Context, parent *unstructured.Unstructured) (empty, present hooks.ObjectMap) {
	q := &Request{Hook: "customize", Name: "customize", Description: "the parent without status"}
	before := len(t.report.Findings) + countRequests(t.report.Findings)
	defer func() {
		q.OK = len(t.report.Findings)+countRequests(t.report.Findings) == before
		t.report.Requests = append(t.report.Requests, *q)
	}()
	request := &hooks.CustomizeRequest{Controller: t.opts.Controller, Parent: parent}
	first, second := &hooks.CustomizeResponse{}, &hooks.CustomizeResponse{}
	c1 := t.do(ctx, "customize", t.customize, request, first)
	c2 := t.do(ctx, "customize", t.customize, request, second)
	q.Sent, q.Milliseconds = 2, max(c1.d, c2.d).Milliseconds()
	t.compare("customize", q.Name, c1, c2)
	if c1.err != nil {
		t.classify(ctx, "customize", t.customize, q.Name, c1, first)
		return nil, nil
	}
	empty, present = hooks.ObjectMap{}, hooks.ObjectMap{}
	var errs []error
	for i, rule := range first.RelatedResources {
		res, err := t.opts.Resources.Get(ctx, rule.APIVersion, rule.Resource)
		if err != nil {
			if t.opts.Offline && discovery.IsNotFound(err) {
				t.report.Notes = append(t.report.Notes, fmt.Sprintf("relatedResources[%d]: %s %s is not known offline (pass its --crd, or a kubeconfig): its related objects are left out of the requests", i, rule.APIVersion, rule.Resource))
				continue
			}
			errs = append(errs, fmt.Errorf("relatedResources[%d]: %w", i, err))
			continue
		}
		empty.EnsureKey(res.APIVersion, res.Kind)
		present.Insert(*t.sync.Version, t.parentRes.Namespaced, relatedObject(res, rule, parent, t.parentRes.Namespaced, *t.customize.Version))
	}
	for _, err := range errs {
		t.report.add(Error, CheckRelatedResources, "customize", q.Name, err.Error(), nil)
	}
	return empty, present
}

// relatedObject makes up an object that rule selects for parent.
func relatedObject(res *discovery.Resource, rule v1alpha1.RelatedResourceRule, parent *unstructured.Unstructured, parentNamespaced bool, version v1alpha1.HookVersion) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetAPIVersion(res.APIVersion)
	obj.SetKind(res.Kind)
	obj.SetName("related-1")
	if len(rule.Names) > 0 {
		obj.SetName(rule.Names[0])
	}
	if res.Namespaced {
		// The namespace the related resolver selects in (related.Namespace);
		// where a rule selects by namespaceSelector or in every namespace,
		// the parent's (or default).
		ns, ok := related.Namespace(rule, parent.GetNamespace(), parentNamespaced, version)
		if !ok {
			ns = parent.GetNamespace()
		}
		if ns == "" {
			ns = "default"
		}
		obj.SetNamespace(ns)
	}
	if rule.LabelSelector != nil && len(rule.LabelSelector.MatchLabels) > 0 {
		obj.SetLabels(rule.LabelSelector.MatchLabels)
	}
	obj.SetUID(types.UID(fakeChildUID("related/" + res.Name)))
	obj.SetResourceVersion("1")
	obj.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	return obj
}

// prefixed returns changes with prefix before their paths.
func prefixed(prefix string, changes []jsondiff.Change) []jsondiff.Change {
	for i := range changes {
		changes[i].Path = prefix + changes[i].Path
	}
	return changes
}

func anyMap(m map[string]string) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
