package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
	"github.com/metactl/metactl/pkg/hooks"
)

// runningController is the controller the manager runs for one controller
// object, and the object's UID and generation it was built from.
type runningController struct {
	uid        types.UID
	generation int64
	controller runner
	// annotations are the values of the controller object's
	// restartAnnotations it was built with ("" when absent): a change of
	// one restarts the controller, as a new generation does (metadata
	// changes keep the generation).
	annotations map[string]string
	// account is its rbac.ServiceAccountAnnotation, among annotations.
	account string
	// failing throttles the writes of its failing objects to its status.
	failing *failingStatus
	// cancelStart cancels the start-up; started is closed once Start has
	// returned, with startErr.
	cancelStart context.CancelFunc
	started     chan struct{}
	startErr    error
	// announced: its start has been reported (Event, metric). Only the
	// reconcile of its object uses it.
	announced bool
	// checkedAt is when its permissions were last checked (forbidden).
	// Only the reconcile of its object uses it.
	checkedAt time.Time
	// whole: it runs whole, on the holder of the cluster bucket
	// (sharding.go).
	whole bool
	// hookTimeouts are the metactl_hook_timeout_seconds values it set,
	// by hook, once announced; guarded by the Manager's mu.
	hookTimeouts map[string]float64
}

// DefaultStartTimeout is the default of Options.StartTimeout.
const DefaultStartTimeout = 2 * time.Minute

// startFailure is the failed start-ups in a row of one version of a
// controller object (its UID, generation and account), and when it may
// start again.
type startFailure struct {
	uid        types.UID
	generation int64
	account    string
	count      int
	retryAt    time.Time
}

// startRetryDelay is the wait before the next start of a controller whose
// start-up failed count times in a row: 500ms, doubling, at most
// Options.MaxRetryDelay (2 minutes by default). It is a function of the
// count that startFailure keeps per controller version, not a
// wait.Backoff: a Backoff steps its own state, which would be a second
// copy of that count to reset with it.
func (m *Manager) startRetryDelay(count int) time.Duration {
	limit := m.opts.MaxRetryDelay
	if limit <= 0 {
		limit = loop.MaxRetryDelay
	}
	delay := 500 * time.Millisecond
	for i := 1; i < count && delay < limit; i++ {
		delay *= 2
	}
	return min(delay, limit)
}

// recordStartFailure records a failed start-up of r, the controller of
// key, and returns how long to wait before starting it again and how many
// times in a row it failed.
func (m *Manager) recordStartFailure(key string, r *runningController) (time.Duration, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.startFailures[key]
	if f == nil || f.uid != r.uid || f.generation != r.generation || f.account != r.account {
		f = &startFailure{uid: r.uid, generation: r.generation, account: r.account}
		m.startFailures[key] = f
	}
	f.count++
	delay := m.startRetryDelay(f.count)
	f.retryAt = time.Now().Add(delay)
	return delay, f.count
}

// startBackoff returns how long the controller of key, for obj, must still
// wait before it starts again after failed start-ups; 0 when it may start
// (a new generation or account may at once).
func (m *Manager) startBackoff(key string, obj *unstructured.Unstructured) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.startFailures[key]
	if f == nil {
		return 0
	}
	if f.uid != obj.GetUID() || f.generation != obj.GetGeneration() || f.account != obj.GetAnnotations()[rbac.ServiceAccountAnnotation] {
		delete(m.startFailures, key)
		return 0
	}
	return max(0, time.Until(f.retryAt))
}

// forgetStartFailures forgets the failed start-ups of key's controller.
func (m *Manager) forgetStartFailures(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.startFailures, key)
}

// start starts r's controller in a goroutine of its own, so that a
// controller whose caches take long to sync (or never do: a resource whose
// list keeps failing) holds none of the manager's workers and delays no
// other controller's start; the object is queued again when Start returns.
func (m *Manager) start(ctx context.Context, key string, r *runningController) {
	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.StartTimeout)
	r.cancelStart, r.started = cancel, make(chan struct{})
	go func() {
		defer cancel()
		r.startErr = r.controller.Start(startCtx)
		close(r.started)
		if r.startErr == nil && m.sharding != nil {
			// Buckets activated while it started were not queued for it
			// (bucketsActivated asks only started controllers), and
			// their cached objects' events came while its gate did not
			// admit them yet.
			r.controller.EnqueueAdmitted(trigger.Trigger{Cause: trigger.CauseStart})
		}
		m.loop.AddFor(key, trigger.Trigger{Cause: trigger.CauseStart})
	}()
}

// halt stops r's controller: it cancels its start-up, if it is still
// starting, waits for Start to return, then stops it (see
// engine.Engine.Stop: in-flight syncs cancelled, waited for at most
// the grace period).
func (r *runningController) halt() {
	r.endStart()
	r.controller.Stop()
}

// endStart cancels r's start-up, if it is still starting, and waits for
// Start to return.
func (r *runningController) endStart() {
	r.cancelStart()
	<-r.started
}

// isStarted reports whether Start has returned.
func (r *runningController) isStarted() bool {
	select {
	case <-r.started:
		return true
	default:
		return false
	}
}

// enqueueAll queues every controller object, to be reconciled again.
func (m *Manager) enqueueAll() {
	for _, k := range m.kinds {
		for _, obj := range k.informer.ListMeta("", nil) {
			m.loop.AddFor(queueKey(k.name, obj.GetName()), trigger.Trigger{Cause: trigger.CauseResync})
		}
	}
}

// reconcile makes the running controller of one controller object match
// the object: started, restarted on a new generation, or stopped (after
// cleaning up its finalizers when the object is deleted).
func (m *Manager) reconcile(ctx context.Context, key string) (time.Duration, error) {
	k, name := m.kindOf(key)
	if k == nil {
		return 0, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(strings.ToLower(k.name), name))
	obj, exists := k.informer.Get("", name)
	deleting := exists && obj.GetDeletionTimestamp() != nil

	m.mu.Lock()
	current := m.running[key]
	m.mu.Unlock()
	if current != nil && exists && !deleting && current.uid == obj.GetUID() && current.generation == obj.GetGeneration() &&
		changedAnnotation(current.annotations, obj) == "" {
		return m.reconcileRunning(ctx, k, key, obj, current)
	}
	if current != nil {
		if err := m.stopChanged(ctx, k, key, name, obj, current); err != nil {
			return 0, err
		}
	}
	if !exists || deleting {
		// Its ControllerReady series goes with the object: stopRunning
		// deleted that of a controller that ran; one that did not run
		// has a 0 (notRunning).
		metrics.ControllerReady.DeleteLabelValues(k.name, name)
	}
	if !exists {
		m.forgetCleanup(key)
		m.forgetStartFailures(key)
		m.forgetMetrics(name)
		return 0, nil
	}
	if deleting {
		return 0, m.finishDeletion(ctx, k, obj, current != nil)
	}
	return m.startController(ctx, k, key, obj)
}

// forgetMetrics deletes every series of the controllers named name
// (metrics.ForgetController) once no controller object of that name
// remains, of either kind: a CompositeController and a DecoratorController
// of one name share their series, and the other's stay while it exists.
func (m *Manager) forgetMetrics(name string) {
	for _, k := range m.kinds {
		if _, exists := k.informer.Get("", name); exists {
			return
		}
	}
	metrics.ForgetController(name)
}

// kindOf returns the kind of controller object that key (kind/name)
// names, nil for none, and the object's name.
func (m *Manager) kindOf(key string) (*kind, string) {
	kindName, name, _ := strings.Cut(key, "/")
	var k *kind
	for _, candidate := range m.kinds {
		if candidate.name == kindName {
			k = candidate
		}
	}
	return k, name
}

// reconcileRunning reconciles current, the controller of key already built
// from obj's version: still starting, it waits; failed to start, it is
// stopped and retried with a backoff of its own; started, it is announced
// once, its account's access is checked again when due, and obj's status
// says it runs.
func (m *Manager) reconcileRunning(ctx context.Context, k *kind, key string, obj *unstructured.Unstructured, current *runningController) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	switch {
	case !current.isStarted():
		// Still starting: queued again once it has started.
		return 0, nil
	case current.startErr != nil:
		err := fmt.Errorf("starting: %w", current.startErr)
		m.stopRunning(k, key, current)
		if werr := m.notRunning(ctx, k, obj, ReasonStartFailed, err.Error()); werr != nil {
			logger.Error(werr, "Reporting the failed start")
		}
		// Retried with a backoff of its own: the queue's, reset by
		// the next reconcile that starts it again, would not grow.
		delay, attempt := m.recordStartFailure(key, current)
		logger.Error(err, "Controller did not start; retrying", "after", delay, "attempt", attempt)
		return delay, nil
	case !current.announced:
		current.announced = true
		m.forgetStartFailures(key)
		m.setHookTimeouts(obj.GetName(), current, hookWebhooks(k, obj))
		m.event(ctx, k, obj, corev1.EventTypeNormal, ReasonStarted, fmt.Sprintf("started generation %d", obj.GetGeneration()))
	}
	next, refused, err := m.recheckAccount(ctx, current)
	if err != nil {
		return 0, err
	}
	if refused != "" {
		logger.Info("Stopping controller: its ServiceAccount lost a permission it needs", "generation", current.generation, "message", refused)
		m.stopRunning(k, key, current)
		if err := m.notRunning(ctx, k, obj, v1alpha1.ReasonForbidden, refused); err != nil {
			return 0, err
		}
		return 0, loop.ErrWaiting // retried with backoff, as a refused start
	}
	return next, m.setRunning(ctx, k, obj, current)
}

// stopChanged stops current, the controller of key (the object named
// name), built from a version of it that is no longer obj's: a new
// generation, a changed restart annotation, or obj deleted or gone (nil),
// whose finalizers it then cleans up first.
func (m *Manager) stopChanged(ctx context.Context, k *kind, key, name string, obj *unstructured.Unstructured, current *runningController) error {
	exists := obj != nil
	deleting := exists && obj.GetDeletionTimestamp() != nil
	// Its start-up, if not done, is cancelled: a controller is never
	// cleaned up or stopped while Start runs.
	current.endStart()
	if deleting || !exists {
		if err := m.cleanup(ctx, k, name, obj, current.uid, current.controller.Cleanup); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Stopping controller", "generation", current.generation)
	m.stopRunning(k, key, current)
	if exists && !deleting {
		if current.uid == obj.GetUID() && current.generation == obj.GetGeneration() {
			m.event(ctx, k, obj, corev1.EventTypeNormal, ReasonStopped, fmt.Sprintf("stopped generation %d to start it again: annotation %s changed", current.generation, changedAnnotation(current.annotations, obj)))
		} else {
			m.event(ctx, k, obj, corev1.EventTypeNormal, ReasonStopped, fmt.Sprintf("stopped generation %d to start generation %d", current.generation, obj.GetGeneration()))
		}
	}
	return nil
}

// finishDeletion lets obj, a deleted controller object, go: it removes
// CleanupFinalizer, after cleaning up the parents' finalizers itself when
// no controller ran (ran false) to do it. Sharded, only the replica
// responsible for obj does (responsibleFor); each other replica has
// cleaned up as it stopped its controller (stopChanged).
func (m *Manager) finishDeletion(ctx context.Context, k *kind, obj *unstructured.Unstructured, ran bool) error {
	if !m.responsibleFor(ctx, k, obj) {
		return nil
	}
	if !ran && finalizer.Has(obj, CleanupFinalizer) {
		if err := m.cleanupWithoutController(ctx, k, obj); err != nil {
			return err
		}
	}
	_, err := finalizer.Remove(ctx, m.client.Resource(k.resource), obj, CleanupFinalizer)
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return err
}

// startController builds the controller of obj (key) and starts it, once
// its finalizer is on, its start-up backoff is over, its hooks'
// credentials are allowed and it has the permissions it needs; else obj's
// status says why it does not run.
func (m *Manager) startController(ctx context.Context, k *kind, key string, obj *unstructured.Unstructured) (time.Duration, error) {
	whole := m.runsWhole(ctx, k, obj)
	if !m.runsHere(whole) {
		// Another replica holds the cluster bucket: it runs this one, and
		// reports on it. Taking the bucket queues the object again.
		return 0, nil
	}
	if hasFinalizeHook(obj) && m.responsibleFor(ctx, k, obj) {
		if _, err := finalizer.Add(ctx, m.client.Resource(k.resource), obj, CleanupFinalizer); err != nil {
			return 0, fmt.Errorf("adding finalizer %s: %w", CleanupFinalizer, err)
		}
	}
	if wait := m.startBackoff(key, obj); wait > 0 {
		// Its start-up failed: StartFailed stays until it starts again.
		return wait, nil
	}
	if refused := m.opts.checkCredentials(k, obj); refused != nil {
		// Only a new generation of the object or other flags mend it:
		// both reconcile it again.
		klog.FromContext(ctx).Info("Refusing to start the controller: its hooks' credentials are not allowed", "reason", refused.reason, "message", refused.message)
		return 0, m.notRunning(ctx, k, obj, refused.reason, refused.message)
	}
	c, err := m.buildAllowed(ctx, k, obj, whole)
	if c == nil {
		return 0, err
	}
	m.register(ctx, key, obj, c, whole)
	return 0, nil
}

// buildAllowed builds the controller of obj and checks its permissions.
// When it cannot run, it returns no controller and the reconcile's error:
// nil once obj's status says why, loop.ErrWaiting when only a retry can
// mend it.
func (m *Manager) buildAllowed(ctx context.Context, k *kind, obj *unstructured.Unstructured, whole bool) (runner, error) {
	c, err := m.build(ctx, k, obj, whole)
	var invalid *engine.InvalidSpecError
	switch {
	case errors.As(err, &invalid):
		return nil, m.notRunning(ctx, k, obj, v1alpha1.ReasonInvalidSpec, err.Error())
	case discovery.IsNotFound(err):
		if err := m.notRunning(ctx, k, obj, v1alpha1.ReasonUnknownResource, err.Error()); err != nil {
			return nil, err
		}
		// A change in discovery requeues it at once (a CRD being
		// established triggers one); retries with backoff are the fallback.
		return nil, loop.ErrWaiting
	case err != nil:
		return nil, err
	}
	if msg, err := m.forbidden(ctx, c); err != nil {
		c.Stop()
		return nil, err
	} else if msg != "" {
		c.Stop()
		if err := m.notRunning(ctx, k, obj, v1alpha1.ReasonForbidden, msg); err != nil {
			return nil, err
		}
		return nil, loop.ErrWaiting // RBAC is not watched: retried with backoff
	}
	return c, nil
}

// register records c, built from obj, as the running controller of key
// (whole: it runs whole, sharding.go) and starts it, unless the manager is
// stopping, which releases it.
func (m *Manager) register(ctx context.Context, key string, obj *unstructured.Unstructured, c runner, whole bool) {
	annotations := restartValues(obj)
	started := &runningController{uid: obj.GetUID(), generation: obj.GetGeneration(), controller: c, failing: &failingStatus{}, whole: whole,
		annotations: annotations, account: annotations[rbac.ServiceAccountAnnotation], checkedAt: time.Now()}
	c.Failing().OnChange(m.onFailingChange(key, started.failing))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopping {
		// Shutting down: stopAll has taken the controllers already, and
		// this one, never started, is released (its account's clients).
		c.Stop()
		return
	}
	m.running[key] = started
	m.start(ctx, key, started)
}

// stopRunning stops r, the running controller of key (a controller object
// of kind k), and forgets it.
func (m *Manager) stopRunning(k *kind, key string, r *runningController) {
	r.halt()
	_, name, _ := strings.Cut(key, "/")
	metrics.ControllerReady.DeleteLabelValues(k.name, name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running[key] == r { // not one started since, by another reconcile
		delete(m.running, key)
	}
	for hook := range r.hookTimeouts {
		metrics.HookTimeout.DeleteLabelValues(name, hook)
	}
	// metactl_hook_timeout_seconds has no kind label: a running
	// controller of the other kind with the same name shares its series,
	// and sets its own again.
	for otherKey, other := range m.running {
		if _, otherName, _ := strings.Cut(otherKey, "/"); otherName == name {
			for hook, seconds := range other.hookTimeouts {
				metrics.HookTimeout.WithLabelValues(name, hook).Set(seconds)
			}
		}
	}
}

// setHookTimeouts sets metactl_hook_timeout_seconds for each hook of r,
// the running controller named name, and remembers them for stopRunning.
func (m *Manager) setHookTimeouts(name string, r *runningController, webhooks []namedWebhook) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.hookTimeouts = make(map[string]float64, len(webhooks))
	for _, h := range webhooks {
		seconds := hooks.Timeout(h.webhook).Seconds()
		r.hookTimeouts[h.name] = seconds
		metrics.HookTimeout.WithLabelValues(name, h.name).Set(seconds)
	}
}

// recheckAccount checks again, once Options.AccountReviewTTL has passed
// since the last check, the permissions of r, a running controller that
// acts as a ServiceAccount (forbidden): RBAC is not watched, and a
// revocation must stop it. It returns how long until the next check is due
// (the caller queues the object again then; 0 for a controller that acts
// as no account), or what is now refused.
func (m *Manager) recheckAccount(ctx context.Context, r *runningController) (next time.Duration, refused string, err error) {
	if _, ok := r.controller.(*accountRunner); !ok {
		return 0, "", nil
	}
	ttl := m.accountReviewTTL()
	if wait := time.Until(r.checkedAt.Add(ttl)); wait > 0 {
		return wait, "", nil
	}
	if refused, err := m.forbidden(ctx, r.controller); err != nil || refused != "" {
		return 0, refused, err
	}
	r.checkedAt = time.Now()
	return ttl, "", nil
}

// healthChanged returns a callback that re-reconciles a controller object,
// to update its Ready condition: for a change of the controller it runs
// (trigger.CauseDependent).
func (m *Manager) healthChanged(kindName string, obj *unstructured.Unstructured) func() {
	key := queueKey(kindName, obj.GetName())
	return func() { m.loop.AddFor(key, trigger.Trigger{Cause: trigger.CauseDependent}) }
}

// stopAll stops every running (or starting) controller, all at once, and
// returns when their in-flight syncs, cancelled, have returned or the
// grace period has passed; no controller is started afterwards.
func (m *Manager) stopAll() {
	m.mu.Lock()
	running := m.running
	m.running = map[string]*runningController{}
	m.stopping = true
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.halt()
		}()
	}
	wg.Wait()
}

// forbidden checks that a built controller has the permissions it needs
// and returns, when it lacks some, what is missing; "" when none is.
// metactl's own are checked with SelfSubjectAccessReviews: every verb the
// controller needs, or, for a controller that acts as a ServiceAccount,
// the right to impersonate it and the reads of the shared cache. The
// account's are checked with SubjectAccessReviews: the writes of
// cluster-scoped resources, and the reads everywhere unless every object
// the controller syncs is namespaced (rbac.BeforeStart; then each
// namespace's reads are checked as its objects are synced,
// engine.Options.MayServe), then get
// of each Secret and ConfigMap its hooks' credentials name (which metactl
// reads for it); the API server checks each namespaced write. Under
// Options.RequireServiceAccount a controller that acts as none is refused.
func (m *Manager) forbidden(ctx context.Context, c runner) (string, error) {
	self := m.authorization.SelfSubjectAccessReviews()
	account, ok := c.(*accountRunner)
	if !ok && m.opts.RequireServiceAccount {
		return "metactl runs with --require-service-account: annotate the controller object with " + rbac.ServiceAccountAnnotation +
			": <namespace>/<name> of the ServiceAccount whose permissions its writes use", nil
	}
	if !ok {
		denied, err := rbac.Denied(ctx, self, c.Access())
		if err != nil || len(denied) == 0 {
			return "", err
		}
		return "metactl may not " + strings.Join(denied, "; ") + " (grant it through the aggregated ClusterRole metactl-controllers)", nil
	}
	sa := account.account
	if allowed, err := rbac.MayImpersonate(ctx, self, sa); err != nil {
		return "", err
	} else if !allowed {
		return fmt.Sprintf("metactl may not impersonate ServiceAccount %s, named by annotation %s (grant verb impersonate on serviceaccounts to metactl, as its ClusterRole metactl does)",
			sa, rbac.ServiceAccountAnnotation), nil
	}
	if denied, err := rbac.Denied(ctx, self, rbac.Reads(c.Access())); err != nil {
		return "", err
	} else if len(denied) > 0 {
		return "metactl may not " + strings.Join(denied, "; ") + ", which its shared cache needs to serve the controller's reads (grant it through the aggregated ClusterRole metactl-controllers)", nil
	}
	review := sa.Reviewer(m.authorization.SubjectAccessReviews())
	if denied, err := rbac.DeniedBy(ctx, review, rbac.BeforeStart(c.Access())); err != nil {
		return "", err
	} else if len(denied) > 0 {
		return (&rbac.ForbiddenError{Account: sa, Denied: denied}).Error() +
			" (the controller acts as it: grant them to " + sa.UserName() + ")", nil
	}
	denied, err := rbac.DeniedBy(ctx, review, account.credentials)
	if err != nil || len(denied) == 0 {
		return "", err
	}
	return (&rbac.ForbiddenError{Account: sa, Denied: denied}).Error() +
		", which its hooks' credentials name (metactl reads a credential for a controller only when its account may: grant get on it to " + sa.UserName() + ")", nil
}

// restartAnnotations are the controller object's annotations that its
// controller is built with: a change of one's value restarts it.
var restartAnnotations = []string{rbac.ServiceAccountAnnotation, engine.SyncedConditionAnnotation,
	engine.RecordAnnotation, engine.ApplyStrategyAnnotation}

// restartValues returns obj's values of restartAnnotations ("" when absent).
func restartValues(obj metav1.Object) map[string]string {
	annotations := obj.GetAnnotations()
	values := make(map[string]string, len(restartAnnotations))
	for _, a := range restartAnnotations {
		values[a] = annotations[a]
	}
	return values
}

// changedAnnotation returns the first of restartAnnotations whose value on
// obj is not the one in built; "" when none changed.
func changedAnnotation(built map[string]string, obj metav1.Object) string {
	annotations := obj.GetAnnotations()
	for _, a := range restartAnnotations {
		if built[a] != annotations[a] {
			return a
		}
	}
	return ""
}
