package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// metactlPhase runs one phase with metactl doing the work: the benchmark
// writes every parent (create, spec update or delete) from o.workers
// goroutines and waits until its informers see every parent converged.
func (b *bench) metactlPhase(ctx context.Context, name string, rep int) error {
	n := b.o.n
	parents := func(i int) dynamic.ResourceInterface {
		return b.dyn.Resource(parentGVR).Namespace(parentNamespace(i, b.o.namespaces))
	}
	want := func(i int) string { return value(name, i) }
	var write func(ctx context.Context, i int) error
	switch name {
	case "create":
		write = func(ctx context.Context, i int) error {
			_, err := parents(i).Create(ctx, parentObject(parentNamespace(i, b.o.namespaces), "metactl", i, value(name, i)), metav1.CreateOptions{})
			return err
		}
	case "update":
		write = func(ctx context.Context, i int) error {
			return b.patchParent(ctx, i, value(name, i))
		}
	case "delete":
		want = func(int) string { return "" }
		write = func(ctx context.Context, i int) error {
			return parents(i).Delete(ctx, parentName(i), metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		}
	default:
		return fmt.Errorf("unknown phase %s", name)
	}

	quiet := b.waitQuiet(ctx)
	// kube-apiserver's counts enclose metactl's, before and after: the
	// replicas' Lease writes between the scrapes are then among those it
	// counted (see leaseWrites).
	serverBefore, err := b.serverMetrics(ctx)
	if err != nil {
		return err
	}
	beforeEach, err := b.scrapeEach(ctx)
	if err != nil {
		return err
	}
	before := concat(beforeEach)
	procBefore, err := b.readProcs()
	if err != nil {
		return err
	}
	cpuBefore, busyBefore := cpuOf(b.cpProcs), machineBusy()
	hookBefore, connsBefore := b.hook.calls.Load(), b.hook.conns.Load()
	b.hook.take() // calls before the phase
	done := b.tracker.begin(name, want)

	var profileDone chan error
	var contentionDone sync.WaitGroup
	defer contentionDone.Wait() // on an error return too
	if name == "create" && rep == 1 && b.metactl.PprofURL != "" {
		// Long enough to cover the phase; the limit says how long that is.
		seconds := 20
		if ls := b.limitAll["create"]; len(ls) > 0 {
			l := ls[len(ls)-1]
			seconds = max(10, int(math.Ceil(3*l.Seconds)))
			if b.o.slowHookMs > 0 {
				seconds = max(seconds, int(math.Ceil(6*l.Seconds)))
			}
		}
		path := filepath.Join(b.outDir, b.profilePrefix()+"-create.cpu.pprof")
		profileDone = make(chan error, 1)
		go func() { profileDone <- b.metactl.profile(ctx, "profile", seconds, path) }()
		b.setCPUProfile(path)
		logf("collecting a %ds CPU profile of metactl into %s", seconds, path)
		// Where its goroutines wait on each other over the same seconds:
		// kept when they come, not judged (an older metactl serves none).
		for _, kind := range []string{"mutex", "block"} {
			contention := filepath.Join(b.outDir, b.profilePrefix()+"-create."+kind+".pprof")
			contentionDone.Go(func() {
				if err := b.metactl.profile(ctx, kind, seconds, contention); err != nil {
					logf("%s profile: %v", kind, err)
				}
			})
		}
	}

	var profile *serverProfile
	if name == "create" && rep == 1 && b.o.apiserverProfile {
		variant := strings.TrimPrefix(b.profilePrefix(), b.o.label) // "" or "-<variant>"
		profile = b.profileAPIServer(ctx, "metactl"+variant+"-create")
		defer func() { _ = profile.wait() }() // on an error return too
	}
	logf("%s %s (run %d): %d parents, %d workers writing", b.who(), name, rep, n, b.o.workers)
	t0 := time.Now()
	err = parallel(ctx, n, b.o.workers, func(ctx context.Context, i int) error {
		b.tracker.wrote(i, time.Now())
		if err := write(ctx, i); err != nil {
			return fmt.Errorf("%s %s: %w", name, parentName(i), err)
		}
		return nil
	})
	if err != nil {
		b.tracker.end()
		return err
	}
	writesDone := time.Since(t0)

	timeout := time.After(b.o.timeout)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			b.tracker.end()
			return ctx.Err()
		case <-timeout:
			got, example := b.tracker.progress()
			b.tracker.end()
			return fmt.Errorf("metactl %s: only %d of %d parents converged within %v; e.g. %s", name, got, n, b.o.timeout, example)
		case <-tick.C:
			if err := b.exited(); err != nil {
				b.tracker.end()
				return err
			}
			got, _ := b.tracker.progress()
			logf("metactl %s: %d/%d converged after %.0fs", name, got, n, time.Since(t0).Seconds())
		}
	}
	started, converged, last := b.tracker.end()
	if err := profile.check(last); err != nil {
		return err
	}
	procConverged, _ := b.readProcs()
	after, err := b.settleAll(ctx)
	if err != nil {
		return err
	}
	afterEach, err := b.scrapeEach(ctx)
	if err != nil {
		return err
	}
	if len(afterEach) > 1 {
		// The counts of every replica from one moment, after all are quiet.
		after = concat(afterEach)
	}
	procAfter, err := b.readProcs()
	if err != nil {
		return err
	}
	serverAfter, err := b.serverMetrics(ctx)
	if err != nil {
		return err
	}
	busy := machineBusy() - busyBefore
	r := &PhaseResult{
		OthersAtStartCPUs:     quiet,
		Parents:               n,
		Converged:             n,
		Seconds:               round3(last.Sub(t0).Seconds()),
		WritesIssuedSeconds:   round3(writesDone.Seconds()),
		SettledSeconds:        round3(time.Since(t0).Seconds()),
		ProcessCPUSeconds:     diffCPU(cpuOf(b.cpProcs), cpuBefore),
		HookCallsSeen:         b.hook.calls.Load() - hookBefore,
		HookConnections:       b.hook.conns.Load() - connsBefore,
		HookCalls:             after.sum("metactl_hook_requests_total") - before.sum("metactl_hook_requests_total"),
		HookCallsByCode:       diffBy(after.by("metactl_hook_requests_total", "hook", "code"), before.by("metactl_hook_requests_total", "hook", "code")),
		ObjectWrites:          diffBy(after.by("metactl_object_writes_total", "verb", "target"), before.by("metactl_object_writes_total", "verb", "target")),
		APIRequests:           diffBy(after.by("metactl_api_requests_total", "verb", "code"), before.by("metactl_api_requests_total", "verb", "code")),
		APIWrites:             after.apiWrites() - before.apiWrites(),
		APIMetricExported:     after.hasMetric("metactl_api_requests_total"),
		ServerWrites:          diffBy(serverWrites(serverAfter), serverWrites(serverBefore)),
		ServerWatchEvents:     watchEvents(serverAfter, serverBefore),
		Syncs:                 diffBy(after.by("metactl_syncs_total", "result"), before.by("metactl_syncs_total", "result")),
		QueueAdds:             after.sum("metactl_workqueue_adds_total") - before.sum("metactl_workqueue_adds_total"),
		QueueRetries:          after.sum("metactl_workqueue_retries_total") - before.sum("metactl_workqueue_retries_total"),
		UncachedReads:         diffBy(after.by("metactl_uncached_reads_total", "reason"), before.by("metactl_uncached_reads_total", "reason")),
		MetactlCPUSeconds:     round3(sumCPU(procAfter) - sumCPU(procBefore)),
		MetactlCPUToConverged: round3(sumCPU(procConverged) - sumCPU(procBefore)),
		MetactlRSSBytes:       maxOf(procAfter, func(p ProcStats) int64 { return p.RSSBytes }),
		MetactlPeakRSSBytes:   maxOf(procAfter, func(p ProcStats) int64 { return p.PeakRSSBytes }),
		MetactlHeapInuseBytes: int64(after.sum("go_memstats_heap_inuse_bytes")),
		MetactlGoRuntime:      after.goRuntime(),
	}
	r.OtherCPUSeconds = others(busy, r.ProcessCPUSeconds, r.MetactlCPUSeconds)
	for _, v := range r.ObjectWrites {
		r.ObjectWritesTotal += v
	}
	for k, v := range r.ServerWrites {
		if k != benchWrite[name] {
			r.ServerWritesNotBench += v
		}
	}
	r.ServerWritesNotBench += r.ServerWrites[benchWrite[name]] - float64(n)
	r.ServerWritesNotBenchPerParent = round3(r.ServerWritesNotBench / float64(n))
	r.HookCallsPerParent = round3(r.HookCalls / float64(n))
	r.ObjectWritesPerParent = round3(r.ObjectWritesTotal / float64(n))
	if b.sharded() {
		r.LeaseWrites = leaseWrites(r)
	}
	r.APIWritesPerParent = round3((r.APIWrites - r.LeaseWrites) / float64(n))
	r.setLatencies(t0, started, converged)
	r.Counts = metactlCountCheck(fmt.Sprintf("run %d", rep), name, r)
	if b.sharded() || (b.cur != nil && len(b.o.replicaCounts) > 0) {
		// With replicas, every variant's figures per replica (the
		// default's one process too, the ratios' reference without r1).
		b.replicaFigures(r, beforeEach, afterEach, procBefore, procConverged, procAfter)
	}
	r.began, r.settled = t0, t0.Add(time.Duration(r.SettledSeconds*float64(time.Second)))
	apiWrites, _ := r.apiWritesPerParent(name)
	summary := RunSummary{
		APIWritesPerParent: apiWrites,
		Seconds:            r.Seconds, MetactlCPUSeconds: r.MetactlCPUSeconds, HookCallsPerParent: r.HookCallsPerParent,
		ObjectWritesPerParent: r.ObjectWritesPerParent, ServerWritesNotBenchPerParent: r.ServerWritesNotBenchPerParent,
		OtherCPUSeconds: r.OtherCPUSeconds, OthersAtStartCPUs: r.OthersAtStartCPUs,
		Counts: r.Counts, HookCallers: r.HookCallers,
	}
	for _, x := range r.Replicas {
		summary.ReplicaCPUSeconds = append(summary.ReplicaCPUSeconds, x.CPUSeconds)
		summary.ReplicaPeakRSSBytes = append(summary.ReplicaPeakRSSBytes, x.PeakRSSBytes)
		summary.ReplicaHookCalls = append(summary.ReplicaHookCalls, x.HookCalls)
		summary.ReplicaCachedObjects = append(summary.ReplicaCachedObjects, x.CachedObjects)
	}
	b.recordRun(name, r, summary)
	logf("%s %s: converged in %.2fs (writes issued in %.2fs), %.2f hook calls and %.2f object writes per parent, %.2f CPU-s",
		b.who(), name, r.Seconds, r.WritesIssuedSeconds, r.HookCallsPerParent, r.ObjectWritesPerParent, r.MetactlCPUSeconds)
	if !r.Counts.Agree {
		logf("%s %s: the counts disagree: %s", b.who(), name, r.Counts.Problem)
	}
	if profileDone != nil {
		logf("waiting for the CPU profile to finish")
		select {
		case err := <-profileDone:
			if err != nil {
				logf("CPU profile: %v", err)
				b.setCPUProfile("")
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		// With every parent and child cached: what the live heap is made of.
		path := filepath.Join(b.outDir, b.profilePrefix()+"-create.heap.pprof")
		if err := b.metactl.saveHeapProfile(ctx, path); err != nil {
			logf("heap profile: %v", err)
		} else {
			logf("saved a heap profile of metactl after the create phase in %s", path)
		}
		// The profiles are the benchmark's instruments, not metactl's work:
		// when more runs follow, the peak RSS is measured over those. (With
		// variants each run has a process of its own: see variant.go.)
		if b.o.runs > 1 && b.cur == nil {
			if err := resetPeakRSS(b.metactl.PID); err != nil {
				logf("resetting metactl's peak RSS: %v", err)
			} else {
				b.result.PeakRSSResetAfterProfile = true
			}
		}
	}
	return nil
}

// cachePhase measures metactl's memory before and after o.cachedChildren
// orphan ConfigMaps, in a namespace without parents, enter its cache.
func (b *bench) cachePhase(ctx context.Context) error {
	k := b.o.cachedChildren
	logf("cache: creating %d orphan ConfigMaps in %s", k, nsCache)
	if _, err := b.metactl.settle(ctx, b.cpProcs); err != nil {
		return err
	}
	sleep(ctx, 3*time.Second)
	b.metactl.forceGC(ctx)
	beforeSnap, err := b.metactl.scrape(ctx)
	if err != nil {
		return err
	}
	before, err := readProc(b.metactl.PID)
	if err != nil {
		return err
	}
	t0 := time.Now()
	cms := b.kube.CoreV1().ConfigMaps(nsCache)
	err = parallel(ctx, k, b.o.workers, func(ctx context.Context, i int) error {
		// Shaped like a child, without an owner.
		name := fmt.Sprintf("cached-%05d", i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:   name,
				Labels: map[string]string{"controller-uid": fmt.Sprintf("00000000-0000-0000-0000-%012d", i)},
				Annotations: map[string]string{"metacontroller.k8s.io/last-applied-configuration": fmt.Sprintf(
					`{"apiVersion":"v1","data":{"value":"cache-%d"},"kind":"ConfigMap","metadata":{"labels":{"controller-uid":"00000000-0000-0000-0000-%012d"},"name":%q,"namespace":%q}}`,
					i, i, name, nsCache)},
			},
			Data: map[string]string{"value": fmt.Sprintf("cache-%d", i)},
		}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	created := time.Since(t0)
	if _, err := b.metactl.settle(ctx, b.cpProcs); err != nil {
		return err
	}
	sleep(ctx, 5*time.Second)
	b.metactl.forceGC(ctx)
	afterSnap, err := b.metactl.scrape(ctx)
	if err != nil {
		return err
	}
	after, err := readProc(b.metactl.PID)
	if err != nil {
		return err
	}
	heapBefore, heapAfter := beforeSnap.sum("go_memstats_heap_inuse_bytes"), afterSnap.sum("go_memstats_heap_inuse_bytes")
	b.result.Cache = &CacheResult{
		Objects:               k,
		CreateSeconds:         round3(created.Seconds()),
		RSSBeforeBytes:        before.RSSBytes,
		RSSAfterBytes:         after.RSSBytes,
		PeakRSSAfterBytes:     after.PeakRSSBytes,
		BytesPerObjectRSS:     round3(float64(after.RSSBytes-before.RSSBytes) / float64(k)),
		HeapInuseBeforeBytes:  int64(heapBefore),
		HeapInuseAfterBytes:   int64(heapAfter),
		BytesPerObjectHeap:    round3((heapAfter - heapBefore) / float64(k)),
		MetactlCPUSeconds:     round3(after.CPUSeconds - before.CPUSeconds),
		MetactlAPIWritesDelta: afterSnap.apiWrites() - beforeSnap.apiWrites(),
		GoRuntimeBefore:       beforeSnap.goRuntime(),
		GoRuntimeAfter:        afterSnap.goRuntime(),
	}
	logf("cache: RSS %s -> %s (%.0f bytes per object), heap in use %s -> %s (%.0f bytes per object)",
		mib(before.RSSBytes), mib(after.RSSBytes), b.result.Cache.BytesPerObjectRSS,
		mib(int64(heapBefore)), mib(int64(heapAfter)), b.result.Cache.BytesPerObjectHeap)
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// removeController removes the CompositeController, waits until metactl
// stopped it, then deletes every parent and child of metactl's namespace.
func (b *bench) removeController(ctx context.Context) error {
	logf("reset: removing the CompositeController, the parents and the children")
	if err := b.dyn.Resource(ccGVR).Delete(ctx, ccName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the CompositeController: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := b.dyn.Resource(ccGVR).Get(ctx, ccName, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		if err != nil && !gone {
			return err
		}
		if gone {
			s, err := b.scrapeAll(ctx)
			if err != nil {
				return err
			}
			if s.sum("metactl_controller_ready", "controller", ccName) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("metactl did not stop the controller within 2 minutes")
		}
		sleep(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	done := b.tracker.begin("delete", func(int) string { return "" })
	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	err := parallel(ctx, b.o.n, b.o.workers, func(ctx context.Context, i int) error {
		ns := parentNamespace(i, b.o.namespaces)
		cms, parents := b.dyn.Resource(cmGVR).Namespace(ns), b.dyn.Resource(parentGVR).Namespace(ns)
		for k := range childrenPerParent {
			if err := cms.Delete(ctx, childName(parentName(i), k), background); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if err := parents.Delete(ctx, parentName(i), background); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	if err != nil {
		b.tracker.end()
		return fmt.Errorf("reset: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.tracker.end()
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		got, example := b.tracker.progress()
		b.tracker.end()
		return fmt.Errorf("reset: only %d of %d parents gone with their children after 5 minutes; e.g. %s", got, b.o.n, example)
	}
	b.tracker.end()
	sleep(ctx, 2*time.Second)
	_, err = b.settleAll(ctx)
	return err
}
