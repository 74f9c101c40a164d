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

func parentUID(parent *unstructured.Unstructured) string {
	if parent == nil {
		return ""
	}
	return string(parent.GetUID())
}
