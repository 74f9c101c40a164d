/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package credentials

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

// CredentialSource returns the Secrets and ConfigMaps that webhooks
// reference for their credentials and CA bundles. Implementations watch
// them, so that rotations take effect without a restart. The objects
// returned are shared and must not be modified. A missing object gives an
// error for which apierrors.IsNotFound is true. It must be safe for
// concurrent use.
type CredentialSource interface {
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// DefaultCredentialIdleTimeout is how long WatchingCredentialSource keeps
// watching an object nobody asked for.
const DefaultCredentialIdleTimeout = time.Hour

// ErrCredentialSourceStopped is returned by a WatchingCredentialSource
// after Stop.
var ErrCredentialSourceStopped = errors.New("credential source stopped")

// WatchingCredentialSource is a CredentialSource that watches each object
// it is asked for, and only that object: the first request for a Secret or
// ConfigMap starts an informer restricted to its namespace and to the field
// selector metadata.name=<name> (which RBAC can authorize with
// resourceNames), waits until it has synced (bounded by the request's
// context), and later requests are answered from its cache. It never lists
// all the Secrets of a namespace or of the cluster.
//
// Watches end with Stop (or when the context given to Run ends), and a
// watch not asked for within the idle timeout is stopped; asking again
// starts it anew.
type WatchingCredentialSource struct {
	client      CoreV1Getter
	idleTimeout time.Duration
	now         func() time.Time

	ctx    context.Context // parent of every watch; cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // running informers

	mu        sync.Mutex
	watches   map[objectRef]*objectWatch
	handlers  []func(namespace, name string)
	lastSweep time.Time
	stopped   bool
}

// objectRef names one watched object.
type objectRef struct {
	kind            string // "Secret" or "ConfigMap"
	namespace, name string
}

func (r objectRef) String() string { return r.kind + " " + r.namespace + "/" + r.name }

// objectWatch is the informer of one object.
type objectWatch struct {
	informer cache.SharedIndexInformer
	synced   <-chan struct{}
	stopped  <-chan struct{}
	cancel   context.CancelFunc
	lastUsed time.Time // guarded by the source's mu

	errMu   sync.Mutex
	lastErr error         // the last error listing or watching the object
	errSig  chan struct{} // closed, and replaced, when lastErr is set
}

// CoreV1Getter gives the core/v1 client a WatchingCredentialSource reads
// through. A clientset (kubernetes.Interface) is one.
type CoreV1Getter interface {
	CoreV1() typedcorev1.CoreV1Interface
}

// CoreV1GetterFunc adapts a function to CoreV1Getter.
type CoreV1GetterFunc func() typedcorev1.CoreV1Interface

// CoreV1 returns f().
func (f CoreV1GetterFunc) CoreV1() typedcorev1.CoreV1Interface { return f() }

// NewWatchingCredentialSource returns a source that watches the objects it
// is asked for through client.
func NewWatchingCredentialSource(client CoreV1Getter) *WatchingCredentialSource {
	ctx, cancel := context.WithCancel(context.Background())
	s := &WatchingCredentialSource{
		client:      client,
		idleTimeout: DefaultCredentialIdleTimeout,
		now:         time.Now,
		ctx:         ctx,
		cancel:      cancel,
		watches:     map[objectRef]*objectWatch{},
	}
	return s
}

// OnChange registers fn to be called, from an informer's goroutine, when a
// watched object is created, deleted, or changes its data after its watch
// has synced. Both Secrets and ConfigMaps are reported. The manager uses it
// to sync again the controllers whose hooks use the object, for example to
// clear a HookAuthError once a missing Secret appears. fn must return
// quickly.
func (s *WatchingCredentialSource) OnChange(fn func(namespace, name string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, fn)
}

// Run blocks until ctx is done, then stops every watch. Watches start on
// demand whether or not Run was called.
func (s *WatchingCredentialSource) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
	s.Stop()
}

// Stop ends every watch and waits for them to stop. Later requests fail
// with ErrCredentialSourceStopped. It is safe to call more than once.
func (s *WatchingCredentialSource) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.watches = map[objectRef]*objectWatch{}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// Secret returns the Secret namespace/name.
func (s *WatchingCredentialSource) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	obj, err := s.get(ctx, objectRef{kind: "Secret", namespace: namespace, name: name})
	if err != nil {
		return nil, err
	}
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in the Secret cache", obj)
	}
	return secret, nil
}

// ConfigMap returns the ConfigMap namespace/name.
func (s *WatchingCredentialSource) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	obj, err := s.get(ctx, objectRef{kind: "ConfigMap", namespace: namespace, name: name})
	if err != nil {
		return nil, err
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in the ConfigMap cache", obj)
	}
	return cm, nil
}

// Watching reports how many objects are being watched.
func (s *WatchingCredentialSource) Watching() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

func (s *WatchingCredentialSource) get(ctx context.Context, ref objectRef) (any, error) {
	if ref.namespace == "" || ref.name == "" {
		return nil, fmt.Errorf("%s: a namespace and a name are needed", ref)
	}
	w, err := s.watch(ref)
	if err != nil {
		return nil, err
	}
	if err := w.waitSynced(ctx); err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	obj, exists, err := w.informer.GetStore().GetByKey(cache.NewObjectName(ref.namespace, ref.name).String())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	if !exists {
		resource := "secrets"
		if ref.kind == "ConfigMap" {
			resource = "configmaps"
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, ref.name)
	}
	return obj, nil
}

// watch returns the watch of ref, starting it if needed.
func (s *WatchingCredentialSource) watch(ref objectRef) (*objectWatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, ErrCredentialSourceStopped
	}
	now := s.now()
	s.sweepLocked(now)
	if w := s.watches[ref]; w != nil {
		w.lastUsed = now
		return w, nil
	}
	w := s.startLocked(ref)
	w.lastUsed = now
	s.watches[ref] = w
	return w, nil
}

// sweepLocked stops the watches not used within the idle timeout. It looks
// at most twice per idle timeout.
func (s *WatchingCredentialSource) sweepLocked(now time.Time) {
	if s.idleTimeout <= 0 || now.Sub(s.lastSweep) < s.idleTimeout/2 {
		return
	}
	s.lastSweep = now
	for ref, w := range s.watches {
		if now.Sub(w.lastUsed) >= s.idleTimeout {
			w.cancel()
			delete(s.watches, ref)
		}
	}
}

// namedListWatch lists and watches, through list and watchFunc, only the
// object called name.
func namedListWatch[L runtime.Object](name string, list func(context.Context, metav1.ListOptions) (L, error), watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	onlyName := func(opts *metav1.ListOptions) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			onlyName(&opts)
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			onlyName(&opts)
			return watchFunc(ctx, opts)
		},
	}
}

func (s *WatchingCredentialSource) startLocked(ref objectRef) *objectWatch {
	var (
		lw      *cache.ListWatch
		example runtime.Object
	)
	if ref.kind == "Secret" {
		secrets := s.client.CoreV1().Secrets(ref.namespace)
		lw, example = namedListWatch(ref.name, secrets.List, secrets.Watch), &corev1.Secret{}
	} else {
		configMaps := s.client.CoreV1().ConfigMaps(ref.namespace)
		lw, example = namedListWatch(ref.name, configMaps.List, configMaps.Watch), &corev1.ConfigMap{}
	}
	// The client decides whether the reflector may stream its initial list
	// as watch events (fake clientsets cannot).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, s.client), example, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(s.ctx)
	w := &objectWatch{
		informer: inf,
		synced:   inf.HasSyncedChecker().Done(),
		stopped:  ctx.Done(),
		cancel:   cancel,
		errSig:   make(chan struct{}),
	}
	// Managed fields are of no use here.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.setError(err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if !isInInitialList {
				s.changed(ref)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			if dataChanged(oldObj, newObj) {
				s.changed(ref)
			}
		},
		DeleteFunc: func(any) { s.changed(ref) },
	})
	s.wg.Go(func() { inf.RunWithContext(ctx) })
	return w
}

func (s *WatchingCredentialSource) changed(ref objectRef) {
	s.mu.Lock()
	handlers := s.handlers
	s.mu.Unlock()
	for _, fn := range handlers {
		fn(ref.namespace, ref.name)
	}
}

// dataChanged reports whether the content of a Secret or ConfigMap
// changed, as opposed to its metadata.
func dataChanged(oldObj, newObj any) bool {
	switch o := oldObj.(type) {
	case *corev1.Secret:
		n, ok := newObj.(*corev1.Secret)
		return !ok || !maps.EqualFunc(o.Data, n.Data, bytes.Equal)
	case *corev1.ConfigMap:
		n, ok := newObj.(*corev1.ConfigMap)
		return !ok || !maps.Equal(o.Data, n.Data) || !maps.EqualFunc(o.BinaryData, n.BinaryData, bytes.Equal)
	}
	return true
}

func (w *objectWatch) setError(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	w.lastErr = err
	close(w.errSig)
	w.errSig = make(chan struct{})
}

func (w *objectWatch) errorState() (<-chan struct{}, error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.errSig, w.lastErr
}

// errNotSynced is wrapped by the errors of a watch that has not synced.
var errNotSynced = errors.New("watch not synced")

// waitSynced waits until the informer has synced. An error listing the
// object before then ends the wait: an API server that refuses (RBAC) or
// cannot be reached is reported at once rather than at the deadline.
func (w *objectWatch) waitSynced(ctx context.Context) error {
	for {
		select {
		case <-w.synced:
			return nil
		default:
		}
		sig, lastErr := w.errorState()
		if lastErr != nil {
			return fmt.Errorf("%w: %w", errNotSynced, lastErr)
		}
		select {
		case <-w.synced:
			return nil
		case <-sig:
		case <-w.stopped:
			return ErrCredentialSourceStopped
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errNotSynced, context.Cause(ctx))
		}
	}
}

var _ CredentialSource = (*WatchingCredentialSource)(nil)
