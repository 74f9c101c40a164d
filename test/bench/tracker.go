package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// tracker watches the parents and ConfigMaps of metactl's namespaces (see
// parentNamespace) and records when each parent converges in the current
// phase.
type tracker struct {
	n          int
	namespaces int
	cancel     context.CancelFunc

	mu        sync.Mutex
	phase     string // "" between phases
	want      []string
	started   []time.Time
	converged []time.Time
	left      int
	last      time.Time
	done      chan struct{}
	parents   []parentSeen
	children  [][childrenPerParent]childSeen
}

type parentSeen struct {
	exists      bool
	specValue   string
	statusValue string
	children    int64
}

type childSeen struct {
	exists bool
	value  string
}

// parseIndex returns i from p-%05d (parent) or p-%05d-k (child k).
func parseIndex(name string) (i, k int, ok bool) {
	rest, found := strings.CutPrefix(name, "p-")
	if !found {
		return 0, 0, false
	}
	num, kStr, isChild := strings.Cut(rest, "-")
	i, err := strconv.Atoi(num)
	if err != nil {
		return 0, 0, false
	}
	k = -1
	if isChild {
		if k, err = strconv.Atoi(kStr); err != nil {
			return 0, 0, false
		}
	}
	return i, k, true
}

// startTracker watches the parents and ConfigMaps of n parents laid out
// over namespaces namespaces (parentNamespace): with 0, bench-metactl's
// alone; otherwise every namespace but the benchmark's others.
func startTracker(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, n, namespaces int) (*tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &tracker{
		n: n, namespaces: namespaces, cancel: cancel,
		want: make([]string, n), started: make([]time.Time, n), converged: make([]time.Time, n),
		parents: make([]parentSeen, n), children: make([][childrenPerParent]childSeen, n),
	}
	ns, tweak := nsMetactl, func(*metav1.ListOptions) {}
	if namespaces > 0 {
		ns = metav1.NamespaceAll
		// The limit's parents have the same names: leave out its
		// namespace, and the cache phase's thousands of ConfigMaps.
		tweak = func(o *metav1.ListOptions) { o.FieldSelector = trackerFieldSelector }
	}
	pf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, tweak)
	pinf := pf.ForResource(parentGVR).Informer()
	_, _ = pinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.parentEvent(obj, false) },
		UpdateFunc: func(_, obj any) { t.parentEvent(obj, false) },
		DeleteFunc: func(obj any) { t.parentEvent(obj, true) },
	})
	cf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
	cinf := cf.Core().V1().ConfigMaps().Informer()
	_, _ = cinf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.childEvent(obj, false) },
		UpdateFunc: func(_, obj any) { t.childEvent(obj, false) },
		DeleteFunc: func(obj any) { t.childEvent(obj, true) },
	})
	pf.Start(ctx.Done())
	cf.Start(ctx.Done())
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), pinf.HasSynced, cinf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("the benchmark's informers did not sync")
	}
	return t, nil
}

func (t *tracker) stop() {
	if t != nil {
		t.cancel()
	}
}

func unwrap(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

func (t *tracker) parentEvent(obj any, deleted bool) {
	u, ok := unwrap(obj).(*unstructured.Unstructured)
	if !ok {
		return
	}
	i, k, ok := parseIndex(u.GetName())
	if !ok || k >= 0 || i >= t.n || u.GetNamespace() != parentNamespace(i, t.namespaces) {
		return
	}
	seen := parentSeen{exists: !deleted}
	if !deleted {
		seen.specValue, _, _ = unstructured.NestedString(u.Object, "spec", "value")
		seen.statusValue, _, _ = unstructured.NestedString(u.Object, "status", "value")
		switch c := u.Object["status"].(type) {
		case map[string]any:
			switch v := c["children"].(type) {
			case int64:
				seen.children = v
			case float64:
				seen.children = int64(v)
			}
		}
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parents[i] = seen
	t.check(i, now)
}

func (t *tracker) childEvent(obj any, deleted bool) {
	cm, ok := unwrap(obj).(*corev1.ConfigMap)
	if !ok {
		return
	}
	i, k, ok := parseIndex(cm.Name)
	if !ok || k < 0 || k >= childrenPerParent || i >= t.n || cm.Namespace != parentNamespace(i, t.namespaces) {
		return
	}
	seen := childSeen{exists: !deleted}
	if !deleted {
		seen.value = cm.Data["value"]
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.children[i][k] = seen
	t.check(i, now)
}

// check records parent i as converged if it is; t.mu is held.
func (t *tracker) check(i int, now time.Time) {
	if t.phase == "" || !t.converged[i].IsZero() {
		return
	}
	p := t.parents[i]
	ok := true
	if t.phase == "delete" {
		ok = !p.exists
		for _, c := range t.children[i] {
			ok = ok && !c.exists
		}
	} else {
		want := t.want[i]
		ok = p.exists && p.specValue == want && p.statusValue == want && p.children == childrenPerParent
		for _, c := range t.children[i] {
			ok = ok && c.exists && c.value == want
		}
	}
	if !ok {
		return
	}
	t.converged[i] = now
	t.last = now
	t.left--
	if t.left == 0 {
		close(t.done)
	}
}

// begin starts a phase: want is each parent's expected value ("" for
// delete).
func (t *tracker) begin(phase string, want func(i int) string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phase = phase
	t.left = t.n
	t.done = make(chan struct{})
	for i := range t.n {
		t.want[i] = want(i)
		t.started[i] = time.Time{}
		t.converged[i] = time.Time{}
	}
	return t.done
}

// wrote records the moment the benchmark wrote parent i.
func (t *tracker) wrote(i int, at time.Time) {
	t.mu.Lock()
	t.started[i] = at
	t.mu.Unlock()
}

// end closes the phase and returns its records.
func (t *tracker) end() (started, converged []time.Time, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phase = ""
	return append([]time.Time(nil), t.started...), append([]time.Time(nil), t.converged...), t.last
}

// progress returns how many parents converged, and a description of one
// that did not.
func (t *tracker) progress() (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	example := ""
	for i := range t.n {
		if t.converged[i].IsZero() {
			p := t.parents[i]
			example = fmt.Sprintf("%s: want %q, parent exists=%v spec.value=%q status.value=%q status.children=%d, children %+v",
				parentName(i), t.want[i], p.exists, p.specValue, p.statusValue, p.children, t.children[i])
			break
		}
	}
	return t.n - t.left, example
}
