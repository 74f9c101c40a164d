package discovery

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// Resource is one resource the API server serves.
type Resource struct {
	// APIVersion is group/version, or just the version for the core group.
	APIVersion string
	// Name is the plural resource name, Kind the kind of its objects.
	Name string
	Kind string
	// SingularName and ShortNames are the other names kubectl knows it by
	// ("deployment", "deploy"); either may be empty.
	SingularName string
	ShortNames   []string
	// Namespaced is false for cluster-scoped resources.
	Namespaced bool
	// HasStatus is true when the resource has a status subresource.
	HasStatus bool
	// Verbs the resource supports.
	Verbs []string
}

// GroupVersionResource returns the resource's GVR.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithResource(r.Name)
}

// GroupVersionKind returns the GVK of the resource's objects.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithKind(r.Kind)
}

// NotFoundError reports a resource or kind the API server does not serve,
// even after a fresh discovery.
type NotFoundError struct {
	APIVersion string
	// Name is the resource name or kind that was looked up.
	Name string
	// Suggestion is the served resource closest to what was looked up
	// (see Suggest), nil when none is close.
	Suggestion *Suggestion
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("the API server serves no resource %q in %s", e.Name, e.APIVersion)
	if e.Suggestion != nil {
		msg += "; did you mean " + e.Suggestion.String() + "?"
	}
	return msg
}

// IsNotFound reports whether err is, or wraps, a *NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

// Options configure a ResourceMap.
type Options struct {
	// RefreshInterval is the period of background refreshes; default 30s.
	RefreshInterval time.Duration
	// MinRefreshInterval bounds on-demand refreshes after misses; default 1s.
	MinRefreshInterval time.Duration
}

// ResourceMap is a snapshot of the API server's resources.
type ResourceMap struct {
	client discovery.DiscoveryInterface
	opts   Options

	mu          sync.RWMutex
	byResource  map[string]*Resource // apiVersion + "/" + resource
	byKind      map[string]*Resource // apiVersion + "/" + kind
	lastRefresh time.Time
	subscribers []func()

	refreshMu sync.Mutex // serialises refreshes
}

// NewResourceMap returns an empty map; call Refresh or Start to fill it.
func NewResourceMap(client discovery.DiscoveryInterface, opts Options) *ResourceMap {
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 30 * time.Second
	}
	if opts.MinRefreshInterval <= 0 {
		opts.MinRefreshInterval = time.Second
	}
	return &ResourceMap{client: client, opts: opts}
}

// Start refreshes the map now and then every RefreshInterval until ctx ends.
// It returns after the first refresh, with its error.
func (m *ResourceMap) Start(ctx context.Context) error {
	err := m.Refresh(ctx)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := m.Refresh(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Refreshing discovery")
		}
	}, m.opts.RefreshInterval)
	return err
}

// Subscribe registers f to be called, from the refreshing goroutine, after
// every refresh that changed the set of resources. f must not block.
func (m *ResourceMap) Subscribe(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subscribers = append(m.subscribers, f)
}

// Refresh reads the server's discovery documents and replaces the snapshot.
// Groups that fail to answer (an aggregated API that is down) keep their
// previous entries.
func (m *ResourceMap) Refresh(ctx context.Context) error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	return m.refreshLocked(ctx)
}

func (m *ResourceMap) refreshLocked(ctx context.Context) error {
	_, lists, err := m.client.ServerGroupsAndResources()
	var failed map[schema.GroupVersion]error
	if err != nil {
		var groupErr *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &groupErr) || len(lists) == 0 {
			return fmt.Errorf("discovering API resources: %w", err)
		}
		failed = groupErr.Groups
		klog.FromContext(ctx).V(2).Info("Some API groups failed discovery; keeping their previous resources", "err", err)
	}
	byResource := map[string]*Resource{}
	byKind := map[string]*Resource{}
	for _, list := range lists {
		subresources := map[string][]string{}
		for _, r := range list.APIResources {
			if parent, sub, ok := strings.Cut(r.Name, "/"); ok {
				subresources[parent] = append(subresources[parent], sub)
			}
		}
		for i := range list.APIResources {
			r := &list.APIResources[i]
			if strings.Contains(r.Name, "/") {
				continue
			}
			res := &Resource{
				APIVersion:   list.GroupVersion,
				Name:         r.Name,
				Kind:         r.Kind,
				SingularName: r.SingularName,
				ShortNames:   r.ShortNames,
				Namespaced:   r.Namespaced,
				Verbs:        r.Verbs,
			}
			for _, sub := range subresources[r.Name] {
				if sub == "status" {
					res.HasStatus = true
				}
			}
			byResource[list.GroupVersion+"/"+r.Name] = res
			byKind[list.GroupVersion+"/"+r.Kind] = res
		}
	}

	m.mu.Lock()
	if failed != nil {
		for key, res := range m.byResource {
			gv, _ := schema.ParseGroupVersion(res.APIVersion)
			if _, ok := failed[gv]; ok {
				byResource[key] = res
				byKind[res.APIVersion+"/"+res.Kind] = res
			}
		}
	}
	changed := !reflect.DeepEqual(byResource, m.byResource)
	m.byResource, m.byKind = byResource, byKind
	m.lastRefresh = time.Now()
	subscribers := append([]func(){}, m.subscribers...)
	m.mu.Unlock()

	if changed {
		for _, f := range subscribers {
			f()
		}
	}
	return nil
}

// Get returns the resource named by apiVersion and plural resource name. On
// a miss it refreshes once (unless a refresh happened within
// MinRefreshInterval) and looks again; it returns a *NotFoundError when the
// server does not serve it.
func (m *ResourceMap) Get(ctx context.Context, apiVersion, resource string) (*Resource, error) {
	return m.lookup(ctx, apiVersion, resource, false, func() map[string]*Resource { return m.byResource })
}

// Cached returns the resource of gvr from the current snapshot, without
// refreshing it on a miss (no request is made): for callers that hold a
// lock, or run on a hot path.
func (m *ResourceMap) Cached(gvr schema.GroupVersionResource) (*Resource, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	res, ok := m.byResource[gvr.GroupVersion().String()+"/"+gvr.Resource]
	return res, ok
}

// GetKind returns the resource whose objects have the given apiVersion and
// kind, refreshing on a miss like Get.
func (m *ResourceMap) GetKind(ctx context.Context, apiVersion, kind string) (*Resource, error) {
	return m.lookup(ctx, apiVersion, kind, true, func() map[string]*Resource { return m.byKind })
}

func (m *ResourceMap) lookup(ctx context.Context, apiVersion, name string, kind bool, index func() map[string]*Resource) (*Resource, error) {
	key := apiVersion + "/" + name
	m.mu.RLock()
	res, ok := index()[key]
	m.mu.RUnlock()
	if ok {
		return res, nil
	}

	m.refreshMu.Lock()
	m.mu.RLock()
	res, ok = index()[key]
	recent := time.Since(m.lastRefresh) < m.opts.MinRefreshInterval
	m.mu.RUnlock()
	if !ok && !recent {
		if err := m.refreshLocked(ctx); err != nil {
			m.refreshMu.Unlock()
			return nil, err
		}
		m.mu.RLock()
		res, ok = index()[key]
		m.mu.RUnlock()
	}
	m.refreshMu.Unlock()
	if !ok {
		m.mu.RLock()
		suggestion := m.suggest(apiVersion, name, kind)
		m.mu.RUnlock()
		return nil, &NotFoundError{APIVersion: apiVersion, Name: name, Suggestion: suggestion}
	}
	return res, nil
}

// ObjectKind returns the resource of an object by its apiVersion and kind,
// as GetKind; a convenience for objects in hand.
func (m *ResourceMap) ObjectKind(ctx context.Context, obj metav1.Type) (*Resource, error) {
	return m.GetKind(ctx, obj.GetAPIVersion(), obj.GetKind())
}
