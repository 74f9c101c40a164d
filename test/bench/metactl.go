package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/test/internal/metactlrun"
)

// metactlProcess is `metactl run` (see metactlrun), with what the
// benchmark reads of it.
type metactlProcess struct {
	*metactlrun.Process
}

func (p *metactlProcess) scrape(ctx context.Context) (snapshot, error) {
	if err := p.Exited(); err != nil {
		return nil, err
	}
	return scrape(ctx, p.MetricsURL)
}

// activity is what settle watches: hook calls, API writes, syncs.
func activity(s snapshot) float64 {
	return s.sum("metactl_hook_requests_total") + s.apiWrites() + s.sum("metactl_syncs_total")
}

// settle waits until metactl is quiet: empty work queues, nothing in
// progress, and no hook call, API write or sync for a second. It returns
// the scrape taken then.
func (p *metactlProcess) settle(ctx context.Context, _ map[string]int) (snapshot, error) {
	return settleOn(ctx, p.scrape, activity)
}

// settleOn waits until the metactl processes that scrape reads are quiet
// (see settle; activity says what counts as work), and returns the
// scrape taken then.
func settleOn(ctx context.Context, scrape func(context.Context) (snapshot, error), activity func(snapshot) float64) (snapshot, error) {
	const quiet = time.Second
	deadline := time.Now().Add(2 * time.Minute)
	var last float64 = -1
	stableSince := time.Now()
	for {
		s, err := scrape(ctx)
		if err != nil {
			return nil, err
		}
		busy := s.sum("metactl_workqueue_depth") > 0 || s.sum("metactl_workqueue_unfinished_work_seconds") > 0
		a := activity(s)
		if busy || a != last {
			last, stableSince = a, time.Now()
		} else if time.Since(stableSince) >= quiet {
			return s, nil
		}
		if time.Now().After(deadline) {
			logf("metactl still busy after 2 minutes; measuring anyway")
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// profile saves the profile named kind ("profile": CPU; "mutex", "block":
// contention, as a delta) of the next seconds to path.
func (p *metactlProcess) profile(ctx context.Context, kind string, seconds int, path string) error {
	if p.PprofURL == "" {
		return errors.New("no pprof endpoint")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := metactlrun.Copy(ctx, fmt.Sprintf("%s/%s?seconds=%d", p.PprofURL, kind, seconds), f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// forceGC makes metactl collect garbage, through the heap profile's gc=1,
// so that its heap in use is its live heap; without pprof it does nothing.
func (p *metactlProcess) forceGC(ctx context.Context) {
	_ = p.HeapProfile(ctx, io.Discard)
}

// saveHeapProfile writes metactl's heap profile to path.
func (p *metactlProcess) saveHeapProfile(ctx context.Context, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.HeapProfile(ctx, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// installController creates the CompositeController and waits until
// metactl reports it Ready.
func (b *bench) installController(ctx context.Context) error {
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": ccName},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource": map[string]any{
				"apiVersion": parentGVR.GroupVersion().String(),
				"resource":   parentGVR.Resource,
				// The limit's parents are gone by now; this is a guard.
				"labelSelector": map[string]any{"matchLabels": map[string]any{"bench": "metactl"}},
			},
			"childResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps",
				"updateStrategy": map[string]any{"method": "InPlace"},
			}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{
				"url": b.hook.url + "/sync", "timeout": "10s",
			}}},
		},
	}}
	if _, err := b.dyn.Resource(ccGVR).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the CompositeController: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := b.dyn.Resource(ccGVR).Get(ctx, ccName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				logf("CompositeController %s is Ready", ccName)
				return nil
			}
		}
		if err := b.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CompositeController %s not Ready within 2 minutes: conditions %v", ccName, conds)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
