package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
)

// DefaultCleanupTimeout is Options.CleanupTimeout's default.
const DefaultCleanupTimeout = time.Minute

// CleanupFinalizer is put on a CompositeController or DecoratorController
// that has a finalize hook, so that deleting it waits until metactl has
// removed the controller's finalizer from every object it manages.
const CleanupFinalizer = "metactl.io/cleanup"

// cleanupState is where the cleanup of a deleted controller object stands.
type cleanupState struct {
	uid types.UID
	// done: the finalizer is removed from its parents, or cleanup gave up.
	done bool
	// failingSince is when cleanup first failed; zero before.
	failingSince time.Time
	// err is the last attempt's error.
	err error
}

// cleanup removes a deleted controller object's finalizer from its parents
// with attempt (a runner's Cleanup, which stops syncing first). obj is nil
// when the object is gone already.
//
// A parent resource that is no longer served has no parents left: that is
// success. Any other failure (a 503 from an aggregated API, a forbidden
// list, ...) is reported on the object, a Ready=False CleanupFailed
// condition, a Warning Event and the log, and retried with the manager's
// backoff; but deleting a controller must not hang on an API that may
// never come back, so once Options.CleanupTimeout has passed since the
// first failure, cleanup gives up: a Warning Event names the resources
// whose objects may still carry the finalizer and how to remove it by
// hand, and cleanup returns nil so that the object goes. It returns an
// error to be retried otherwise.
func (m *Manager) cleanup(ctx context.Context, k *kind, name string, obj *unstructured.Unstructured, uid types.UID, attempt func(context.Context) error) error {
	key := queueKey(k.name, name)
	m.mu.Lock()
	state, ok := m.cleanups[key]
	if !ok || state.uid != uid {
		state = cleanupState{uid: uid}
	}
	m.mu.Unlock()
	if !state.done {
		state = m.tryCleanup(ctx, k, name, obj, state, attempt)
	}
	m.mu.Lock()
	m.cleanups[key] = state
	m.mu.Unlock()
	if !state.done {
		return fmt.Errorf("cleanup: %w", state.err)
	}
	return nil
}

// tryCleanup makes one attempt for cleanup and returns the new state.
func (m *Manager) tryCleanup(ctx context.Context, k *kind, name string, obj *unstructured.Unstructured, state cleanupState, attempt func(context.Context) error) cleanupState {
	err := attempt(ctx)
	state.err = err
	if err == nil {
		state.done = true
		return state
	}
	logger := klog.FromContext(ctx)
	ref := obj
	if ref == nil {
		// Gone already: Events still name it, by UID.
		ref = &unstructured.Unstructured{}
		ref.SetAPIVersion(k.resource.GroupVersion().String())
		ref.SetKind(k.name)
		ref.SetName(name)
		ref.SetUID(state.uid)
	}
	now := time.Now()
	first := state.failingSince.IsZero()
	if first {
		state.failingSince = now
	}
	deadline := state.failingSince.Add(m.opts.CleanupTimeout)
	if !now.Before(deadline) {
		state.done = true
		msg := fmt.Sprintf("gave up removing this controller's finalizer from its parents after %v: %v. %s",
			m.opts.CleanupTimeout, err, manualRemoval(finalizer.Remaining(err)))
		logger.Error(err, "Gave up removing the deleted controller's finalizer; its parents may still carry it", "after", m.opts.CleanupTimeout)
		m.event(ctx, k, ref, corev1.EventTypeWarning, ReasonCleanupAbandoned, msg)
		return state
	}
	if first {
		// Reported once: the condition's write would otherwise re-queue
		// the object at once whenever the error's text changes. The log
		// has every failure.
		msg := fmt.Sprintf("removing this controller's finalizer from its parents failed (retrying until %s, then the %s goes anyway): %v",
			deadline.UTC().Format(time.RFC3339), k.name, err)
		if obj == nil {
			m.event(ctx, k, ref, corev1.EventTypeWarning, ReasonCleanupFailed, msg)
		} else if err := m.notRunning(ctx, k, obj, ReasonCleanupFailed, msg); err != nil {
			logger.Error(err, "Reporting the failed cleanup")
		}
	}
	// The backoff may outlast the deadline: come back by then at the latest.
	m.loop.AddAfterFor(queueKey(k.name, name), deadline.Sub(now), trigger.Trigger{Cause: trigger.CauseRetry})
	return state
}

// cleanupWithoutController cleans up for a deleted controller object that
// no controller runs for: metactl restarted (or took over the leader
// Lease) while it was being deleted, or it never started. A controller is
// built for the purpose and never started. One that cannot be built, for
// its spec or for a resource that is not served, is not looked for: when
// the unserved resource is the parent's there is nothing to remove, and in
// the other cases (rare: a spec the API server accepted but metactl
// refuses, a child resource gone) the log says that finalizers may remain.
// Other failures are cleanup's.
func (m *Manager) cleanupWithoutController(ctx context.Context, k *kind, obj *unstructured.Unstructured) error {
	return m.cleanup(ctx, k, obj.GetName(), obj, obj.GetUID(), func(ctx context.Context) error {
		c, err := m.build(ctx, k, obj, false) // never started: its informers do not matter
		var invalid *engine.InvalidSpecError
		switch {
		case errors.As(err, &invalid) || discovery.IsNotFound(err):
			klog.FromContext(ctx).Info("Not looking for this deleted controller's finalizer on its parents: it cannot be built; unless its parent resource is not served, they may still carry it", "reason", err)
			return nil
		case err != nil:
			return fmt.Errorf("building the controller to clean up: %w", err)
		}
		defer c.Stop()
		return c.Cleanup(ctx)
	})
}

func (m *Manager) forgetCleanup(key string) {
	m.mu.Lock()
	delete(m.cleanups, key)
	m.mu.Unlock()
}

// manualRemoval tells how to remove a finalizer by hand from the objects of
// each resource that may still carry it.
func manualRemoval(remaining []*finalizer.RemainingError) string {
	var parts []string
	for _, r := range remaining {
		resource := r.Resource.Resource
		if r.Resource.Group != "" {
			resource += "." + r.Resource.Version + "." + r.Resource.Group
		}
		parts = append(parts, fmt.Sprintf("Objects of %s may still carry finalizer %s: list them with "+
			"'kubectl get %s -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FINALIZERS:.metadata.finalizers' "+
			"and remove it from each one's metadata.finalizers (kubectl edit).", resource, r.Finalizer, resource))
	}
	return strings.Join(parts, " ")
}
