package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// FailingStatusInterval is the shortest time between two changes of a
// running controller's failing objects on its status (the failingObjects
// count and the Synced condition): a burst of failing or recovering syncs
// makes one write, not one per sync.
const FailingStatusInterval = 5 * time.Second

// runningMessage is the Ready condition's message of a running controller.
const runningMessage = "the controller runs with synced caches"

// failingStatus throttles the changes of one running controller's failing
// objects on its status. Safe for concurrent use.
type failingStatus struct {
	// scheduled is true while a reconcile to show a change is queued.
	scheduled atomic.Bool

	mu      sync.Mutex
	shown   engine.FailingSummary
	shownAt time.Time
}

// wait returns how long a change must wait before it may be shown.
func (f *failingStatus) wait(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(0, f.shownAt.Add(FailingStatusInterval).Sub(now))
}

// onFailingChange returns the callback that queues the controller object, once
// until its reconcile, when the set of failing objects changes: at once
// when nothing changed on the status for FailingStatusInterval, else when
// that interval has passed.
func (m *Manager) onFailingChange(key string, f *failingStatus) func() {
	return func() {
		if f.scheduled.CompareAndSwap(false, true) {
			// A change of the controller it runs: trigger.CauseDependent.
			m.loop.AddAfterFor(key, f.wait(time.Now()), trigger.Trigger{Cause: trigger.CauseDependent})
		}
	}
}

// next returns the summary to show now: current's, or, when the one shown
// changed less than FailingStatusInterval ago, the one shown, with how
// long until current's may be.
func (f *failingStatus) next(current *engine.Failing, now time.Time) (engine.FailingSummary, time.Duration) {
	f.scheduled.Store(false)
	summary := current.Summary()
	f.mu.Lock()
	defer f.mu.Unlock()
	if summary == f.shown {
		return summary, 0
	}
	if wait := f.shownAt.Add(FailingStatusInterval).Sub(now); wait > 0 {
		return f.shown, wait
	}
	return summary, 0
}

// showed records that summary is on the status since now.
func (f *failingStatus) showed(summary engine.FailingSummary, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if summary != f.shown {
		f.shown, f.shownAt = summary, now
	}
}

// setRunning writes the status of a running controller: Ready, unless its
// hooks fail for their credentials, and its failing objects, throttled by
// FailingStatusInterval.
func (m *Manager) setRunning(ctx context.Context, k *kind, obj *unstructured.Unstructured, r *runningController) error {
	now := time.Now()
	summary, wait := r.failing.next(r.controller.Failing(), now)
	if wait > 0 {
		m.loop.AddAfterFor(queueKey(k.name, obj.GetName()), wait, trigger.Trigger{Cause: trigger.CauseResyncAfter})
	}
	ready := metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunning, Message: runningMessage}
	if summary.Count > 0 {
		ready.Message += "; " + summary.Message
	}
	if err := r.controller.HookCredentialError(); err != nil {
		ready = metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHookAuthError, Message: err.Error()}
	}
	if err := m.writeStatus(ctx, k, obj, ready, &summary); err != nil {
		return err
	}
	r.failing.showed(summary, now)
	return nil
}

// event records an Event about obj, a controller object of kind k, when
// this replica is responsible for it (responsibleFor): sharded, one
// replica reports on each controller object.
func (m *Manager) event(ctx context.Context, k *kind, obj *unstructured.Unstructured, eventType, reason, message string) {
	if m.responsibleFor(ctx, k, obj) {
		m.recorder.Event(obj, eventType, reason, message)
	}
}

// notRunning reports why the controller of obj does not run: a Warning
// Event with reason and message, and the Ready condition False with the
// same (it has no Synced condition and no failing objects).
func (m *Manager) notRunning(ctx context.Context, k *kind, obj *unstructured.Unstructured, reason, message string) error {
	m.event(ctx, k, obj, corev1.EventTypeWarning, reason, message)
	return m.writeStatus(ctx, k, obj, metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: message}, nil)
}

// writeStatus writes the Ready condition, the failing objects (none when
// failing is nil: the controller does not run) and observedGeneration to
// the controller object's status, when they differ from what it has, and
// sets metrics.ControllerReady to match the condition. Sharded, only the
// replica responsible for obj writes (responsibleFor); every replica sets
// its metric.
func (m *Manager) writeStatus(ctx context.Context, k *kind, obj *unstructured.Unstructured, ready metav1.Condition, failing *engine.FailingSummary) error {
	readyValue := 0.0
	if ready.Status == metav1.ConditionTrue {
		readyValue = 1
	}
	metrics.ControllerReady.WithLabelValues(k.name, obj.GetName()).Set(readyValue)
	if !m.responsibleFor(ctx, k, obj) {
		return nil
	}
	var cs v1alpha1.ControllerStatus
	if raw, ok := obj.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &cs)
	}
	ready.Type, ready.ObservedGeneration = v1alpha1.ConditionReady, obj.GetGeneration()
	changed := meta.SetStatusCondition(&cs.Conditions, ready)
	var count int32
	if failing == nil {
		changed = meta.RemoveStatusCondition(&cs.Conditions, v1alpha1.ConditionSynced) || changed
	} else {
		synced := metav1.Condition{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllSynced,
			Message: "the last sync of every object succeeded", ObservedGeneration: obj.GetGeneration()}
		if failing.Count > 0 {
			synced.Status, synced.Reason, synced.Message = metav1.ConditionFalse, v1alpha1.ReasonSyncErrors, failing.Message
		}
		changed = meta.SetStatusCondition(&cs.Conditions, synced) || changed
		count = int32(failing.Count)
	}
	if cs.FailingObjects != count {
		cs.FailingObjects, changed = count, true
	}
	if !changed && cs.ObservedGeneration == obj.GetGeneration() {
		return nil
	}
	cs.ObservedGeneration = obj.GetGeneration()
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cs)
	if err != nil {
		return err
	}
	// A merge patch leaves out what it omits: 0 is written, not omitted.
	status["failingObjects"] = count
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = m.client.Resource(k.resource).Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the controller's status: %w", err)
	}
	return nil
}
