package children

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// What a Writer remembers of what it reported: a report is not repeated
// for reportTTL (an API server keeps an Event for an hour by default: a
// problem still there after that is reported again), and at most
// reportedMax reports are remembered, the least recently made forgotten
// first.
const (
	reportTTL   = time.Hour
	reportedMax = 4096
)

// reported remembers, by key, what was reported, for a while and up to a
// number of keys. Safe for concurrent use.
type reported struct {
	mu    sync.Mutex
	cache *cache.LRUExpireCache
	ttl   time.Duration
}

func newReported(max int, ttl time.Duration, clock cache.Clock) *reported {
	return &reported{cache: cache.NewLRUExpireCacheWithClock(max, clock), ttl: ttl}
}

// first reports whether the report named by parts was not made within the
// time to live, and remembers it as made now. Keys are hashed: a report's
// text costs no memory.
func (r *reported) first(parts ...string) bool {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	key := h.Sum64()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache.Get(key); ok {
		return false
	}
	r.cache.Add(key, struct{}{}, r.ttl)
	return true
}

// memory returns the Writer's memory of its reports.
func (w *Writer) memory() *reported {
	w.reportedOnce.Do(func() {
		if w.reported == nil {
			w.reported = newReported(reportedMax, reportTTL, clock.RealClock{})
		}
	})
	return w.reported
}

// noun is what the Writer calls the objects it writes.
func (w *Writer) noun() string {
	if w.Noun != "" {
		return w.Noun
	}
	return "child"
}

// childName names obj for an Event on parent: by name in the parent's
// namespace, else by namespace/name.
func childName(parent, obj *unstructured.Unstructured) string {
	if parent != nil && obj.GetNamespace() == parent.GetNamespace() {
		return obj.GetName()
	}
	return Key(obj)
}

// collectWarnings returns the option of one objectclient.Client write
// that hands the API server's warnings to the returned function's result:
// call it once the write returned.
func collectWarnings() (objectclient.WriteOption, func() []string) {
	var warnings []string
	return objectclient.Warnings(func(text string) { warnings = append(warnings, text) }), func() []string { return warnings }
}

// reportWarnings reports the warnings the API server returned on a write
// (verb: create, update or delete) of obj, a child of parent: a Warning
// Event on the parent with those not reported for this child within
// reportTTL, and a log line. Repeats are logged at verbosity 4.
func (w *Writer) reportWarnings(ctx context.Context, parent *unstructured.Unstructured, res *Resource, verb string, obj *unstructured.Unstructured, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	var fresh []string
	for _, text := range warnings {
		if w.memory().first("warning", parentUID(parent), res.GroupVersionResource().String(), Key(obj), text) {
			fresh = append(fresh, text)
			logger.Info("API server warning on a write", "verb", verb, "kind", res.Kind, "child", Key(obj), "warning", text)
		} else {
			logger.V(4).Info("API server warning on a write, already reported", "verb", verb, "kind", res.Kind, "child", Key(obj), "warning", text)
		}
	}
	if len(fresh) == 0 || w.Recorder == nil || parent == nil {
		return
	}
	listed := fresh
	if len(listed) > maxWarningsInEvent {
		listed = append(listed[:maxWarningsInEvent:maxWarningsInEvent], fmt.Sprintf("and %d more (in metactl's log)", len(fresh)-maxWarningsInEvent))
	}
	msg := fmt.Sprintf("the API server warned on the %s of %s %s %s: %s", verbNoun(verb), w.noun(), res.Kind, childName(parent, obj), strings.Join(listed, "; "))
	for _, text := range fresh {
		if strings.HasPrefix(text, "unknown field") {
			msg += " (the API server drops unknown fields: check the field's name and place against the " + res.Kind + " schema)"
			break
		}
	}
	w.Recorder.Event(parent, corev1.EventTypeWarning, ReasonChildWriteWarning, msg)
}

// maxWarningsInEvent bounds the warnings one Event lists, to keep it
// short; the log has them all.
const maxWarningsInEvent = 5

func verbNoun(verb string) string {
	switch verb {
	case "create":
		return "creation"
	case "delete":
		return "deletion"
	}
	return verb
}

// reportKept reports, once for each state the hook asks for, that have,
// a child of parent with update strategy OnDelete that an update would
// change, is kept as it is because the hook asks for something other than
// what it asked when have was written: a Normal Event on the parent and a
// log line at verbosity 2. A child that differs while the hook asks the
// same (edited by someone else, or a field the API server dropped) is not
// reported: OnDelete is there to leave it so.
func (w *Writer) reportKept(ctx context.Context, parent *unstructured.Unstructured, res *Resource, key string, have, want *unstructured.Unstructured) {
	// What the hook asks, as the child would record it when written.
	rec := &unstructured.Unstructured{Object: map[string]any{}}
	if err := apply.SetLastApplied(rec, want.Object); err != nil {
		return // reported when the child is written
	}
	asked, err := apply.LastApplied(rec)
	if err != nil {
		return
	}
	if last, err := apply.LastApplied(have); err == nil && last != nil && equality.Semantic.DeepEqual(last, asked) {
		return
	}
	if !w.memory().first("kept", parentUID(parent), res.GroupVersionResource().String(), key, rec.GetAnnotations()[apply.LastAppliedAnnotation]) {
		return
	}
	klog.FromContext(ctx).V(2).Info("Not updating what the hook asks to change: update strategy OnDelete",
		"kind", res.Kind, "child", key)
	if w.Recorder == nil || parent == nil {
		return
	}
	w.Recorder.Eventf(parent, corev1.EventTypeNormal, ReasonChildNotUpdated,
		"%s %s %s differs from what the hook asks and is left as it is: its update strategy is OnDelete (the default), "+
			"which changes an existing %s only by creating it again once it is deleted; delete it to apply the change now, "+
			"or set updateStrategy: {method: InPlace} (or Recreate) for %s in the controller",
		w.noun(), res.Kind, childName(parent, want), w.noun(), res.Name)
}

// reportTaken reports whether want, a desired child of parent that was
// not created because an object holds its name, is held by an object the
// parent does not control (not its own child the cache has yet to see),
// and then reports it: a Warning Event on the parent naming the holder
// and why the parent does not own it (another controller's; none, but
// not adopted; being deleted, with its finalizers), once per child and
// holder within reportTTL, and a log line. The holder is read from res's
// informer, else from the API server; when it cannot be read (gone
// meanwhile), reportTaken reports false: the next sync tries again.
func (w *Writer) reportTaken(ctx context.Context, parent *unstructured.Unstructured, res *Resource, want *unstructured.Unstructured) bool {
	var holder metav1.Object
	if res.Informer != nil {
		if obj, ok := res.Informer.GetMeta(want.GetNamespace(), want.GetName()); ok {
			holder = obj
		}
	}
	if holder == nil {
		meta, err := w.Objects.GetMetadata(ctx, res.GroupVersionResource(), want.GetNamespace(), want.GetName())
		if err != nil {
			klog.FromContext(ctx).V(4).Info("The holder of a child's name is not readable", "kind", res.Kind, "child", Key(want), "err", err)
			return false
		}
		holder = meta
	}
	if ref := metav1.GetControllerOfNoCopy(holder); ref != nil && parent != nil && ref.UID == parent.GetUID() {
		return false // its own child, not yet in the cache
	}
	why := takenBecause(holder)
	if !w.memory().first("taken", parentUID(parent), res.GroupVersionResource().String(), Key(want), string(holder.GetUID()), why) {
		return true
	}
	klog.FromContext(ctx).Info("A child's name is taken by an object the parent does not own",
		"kind", res.Kind, "child", Key(want), "holder", holder.GetUID(), "why", why)
	if w.Recorder != nil && parent != nil {
		w.Recorder.Eventf(parent, corev1.EventTypeWarning, ReasonChildNameTaken,
			"%s %s %s is not created: an object of that name %s; the parent is synced again when it goes (rename the %s in the hook's answer, or delete that object)",
			w.noun(), res.Kind, childName(parent, want), why, w.noun())
	}
	return true
}

// reportTerminating reports that have, a child of parent that the hook
// still asks for, is being deleted and waits for finalizers that are not
// the garbage collector's (someone else's to remove, possibly never): a
// Warning Event on the parent naming them, once per child for a while,
// and a log line. Its deletion syncs the parent again: it is one of the
// parent's own.
func (w *Writer) reportTerminating(ctx context.Context, parent *unstructured.Unstructured, res *Resource, have *unstructured.Unstructured) {
	var waits []string
	for _, f := range have.GetFinalizers() {
		if f != metav1.FinalizerDeleteDependents && f != metav1.FinalizerOrphanDependents {
			waits = append(waits, f)
		}
	}
	if len(waits) == 0 || !w.memory().first("terminating", parentUID(parent), res.GroupVersionResource().String(), string(have.GetUID())) {
		return
	}
	klog.FromContext(ctx).Info("A child is being deleted and waits for finalizers", "kind", res.Kind, "child", Key(have), "finalizers", waits)
	if w.Recorder != nil && parent != nil {
		w.Recorder.Eventf(parent, corev1.EventTypeWarning, ReasonChildTerminating,
			"%s %s %s is being deleted since %s and waits for finalizers %s: it is created again once it is gone (whoever added them must remove them)",
			w.noun(), res.Kind, childName(parent, have), have.GetDeletionTimestamp().UTC().Format(time.RFC3339), strings.Join(waits, ", "))
	}
}

// takenBecause says why the parent does not own holder, the object that
// holds a desired child's name.
func takenBecause(holder metav1.Object) string {
	if ts := holder.GetDeletionTimestamp(); ts != nil {
		if f := holder.GetFinalizers(); len(f) > 0 {
			return fmt.Sprintf("is being deleted since %s and waits for finalizers %s", ts.UTC().Format(time.RFC3339), strings.Join(f, ", "))
		}
		return fmt.Sprintf("is being deleted since %s", ts.UTC().Format(time.RFC3339))
	}
	if ref := metav1.GetControllerOfNoCopy(holder); ref != nil {
		return fmt.Sprintf("is controlled by %s %s", ref.Kind, ref.Name)
	}
	return "has no controller but is not adopted (its labels do not match the parent's selector)"
}

func parentUID(parent *unstructured.Unstructured) string {
	if parent == nil {
		return ""
	}
	return string(parent.GetUID())
}
