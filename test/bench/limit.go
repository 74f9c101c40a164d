package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/dynamic/apply"
	"github.com/metactl/metactl/pkg/dynamic/ownership"
)

func parentName(i int) string { return fmt.Sprintf("p-%05d", i) }

// value is what a parent's spec.value is in a phase.
func value(phase string, i int) string { return fmt.Sprintf("%s-%d", phase, i) }

func parentObject(ns, who string, i int, val string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": parentGVR.GroupVersion().String(),
		"kind":       parentGVK.Kind,
		"metadata": map[string]any{
			"name": parentName(i), "namespace": ns,
			"labels": map[string]any{"bench": who},
		},
		"spec": map[string]any{"value": val},
	}}
}

// childObject is the ConfigMap metactl writes for the hook's k-th child of
// parent: the hook's object, plus the controller-uid label, the controller
// reference and the last-applied annotation.
func childObject(parent *unstructured.Unstructured, k int, val string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      childName(parent.GetName(), k),
			"namespace": parent.GetNamespace(),
			"labels":    map[string]any{"controller-uid": string(parent.GetUID())},
		},
		"data": map[string]any{"value": val},
	}}
	obj.SetOwnerReferences([]metav1.OwnerReference{ownership.ControllerRef(parent, parentGVK)})
	out := obj.DeepCopy()
	if err := apply.SetLastApplied(out, obj.Object); err != nil {
		return nil, err
	}
	return out, nil
}

func setStatus(parent *unstructured.Unstructured, val string) *unstructured.Unstructured {
	p := parent.DeepCopy()
	p.Object["status"] = map[string]any{
		"value":              val,
		"children":           int64(childrenPerParent),
		"observedGeneration": p.GetGeneration(),
	}
	return p
}

// parallel calls f for 0..n-1 from workers goroutines, stopping at the
// first error.
func parallel(parent context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return parent.Err()
}

// limitPhases makes, with a client that has no rate limit and workers
// goroutines, the same object writes metactl makes for n parents: create
// (parent, 3 ConfigMaps, status), update (parent spec, 3 ConfigMaps,
// status) and delete (3 ConfigMaps, parent). A parent counts as converged
// when its last write returned. Nothing watches these parents and
// ConfigMaps but the control plane itself (kube-controller-manager's
// garbage collector watches every resource, in metactl's phases too).
// record: measure the phases (not for the warm-up). With apiProfile set,
// kube-apiserver's CPU profile over the create phase is saved under that
// name (profileAPIServer).
func (b *bench) limitPhases(ctx context.Context, ns string, n, workers int, record bool, apiProfile string) (map[string]*PhaseResult, error) {
	parents := make([]*unstructured.Unstructured, n)
	children := make([][childrenPerParent]*unstructured.Unstructured, n)
	out := map[string]*PhaseResult{}
	// issued counts the write requests the client sent in a phase.
	var issued atomic.Int64
	client := b.dyn.Resource(parentGVR).Namespace(ns)
	cms := b.dyn.Resource(cmGVR).Namespace(ns)

	phase := func(name string, f func(ctx context.Context, i int) error) error {
		if record {
			logf("limit %s: %d parents, %d writers", name, n, workers)
		}
		quiet := 0.0
		if record {
			quiet = b.waitQuiet(ctx)
		}
		started := make([]time.Time, n)
		done := make([]time.Time, n)
		cpuBefore, busyBefore := cpuOf(b.cpProcs), machineBusy()
		serverBefore, err := b.serverMetrics(ctx)
		if err != nil {
			return err
		}
		issued.Store(0)
		var profile *serverProfile
		if apiProfile != "" && name == "create" {
			profile = b.profileAPIServer(ctx, apiProfile)
			defer func() { _ = profile.wait() }() // on an error return too
		}
		t0 := time.Now()
		err = parallel(ctx, n, workers, func(ctx context.Context, i int) error {
			started[i] = time.Now()
			if err := f(ctx, i); err != nil {
				return fmt.Errorf("%s %s: %w", name, parentName(i), err)
			}
			done[i] = time.Now()
			return nil
		})
		if err != nil {
			return err
		}
		end := time.Now()
		if record {
			r := &PhaseResult{Parents: n, Writers: workers, Seconds: round3(end.Sub(t0).Seconds()), Converged: n, OthersAtStartCPUs: quiet}
			r.setLatencies(t0, started, done)
			r.ProcessCPUSeconds = diffCPU(cpuOf(b.cpProcs), cpuBefore)
			r.OtherCPUSeconds = others(machineBusy()-busyBefore, r.ProcessCPUSeconds, 0)
			serverAfter, err := b.serverMetrics(ctx)
			if err != nil {
				return err
			}
			r.ServerWrites = diffBy(serverWrites(serverAfter), serverWrites(serverBefore))
			r.ServerWatchEvents = watchEvents(serverAfter, serverBefore)
			r.Counts = limitCountCheck(fmt.Sprintf("%d writers", workers), n, float64(issued.Load()), r.ServerWrites)
			out[name] = r
			logf("limit %s: %.2fs with %d writers", name, r.Seconds, workers)
			if !r.Counts.Agree {
				logf("limit %s: kube-apiserver counted %s, the client issued %.0f writes", name, formatCounts(r.Counts.Server, 1), r.Counts.Issued)
			}
		}
		if err := profile.check(end); err != nil {
			return err
		}
		// Let the garbage collector and etcd catch up before the next phase.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
		return nil
	}

	if err := phase("create", func(ctx context.Context, i int) error {
		val := value("create", i)
		issued.Add(1)
		p, err := client.Create(ctx, parentObject(ns, "limit", i, val), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		for k := range childrenPerParent {
			cm, err := childObject(p, k, val)
			if err != nil {
				return err
			}
			issued.Add(1)
			if children[i][k], err = cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		issued.Add(1)
		parents[i], err = client.UpdateStatus(ctx, setStatus(p, val), metav1.UpdateOptions{})
		return err
	}); err != nil {
		return nil, err
	}

	if err := phase("update", func(ctx context.Context, i int) error {
		val := value("update", i)
		patch := fmt.Appendf(nil, `{"spec":{"value":%q}}`, val)
		issued.Add(1)
		p, err := client.Patch(ctx, parentName(i), types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		for k := range childrenPerParent {
			want, err := childObject(p, k, val)
			if err != nil {
				return err
			}
			cm := children[i][k].DeepCopy()
			cm.Object["data"] = want.Object["data"]
			cm.SetAnnotations(want.GetAnnotations())
			issued.Add(1)
			if children[i][k], err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		issued.Add(1)
		parents[i], err = client.UpdateStatus(ctx, setStatus(p, val), metav1.UpdateOptions{})
		return err
	}); err != nil {
		return nil, err
	}

	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if err := phase("delete", func(ctx context.Context, i int) error {
		for k := range childrenPerParent {
			issued.Add(1)
			if err := cms.Delete(ctx, childName(parentName(i), k), background); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		issued.Add(1)
		if err := client.Delete(ctx, parentName(i), background); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}
