package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metactl/metactl/test/internal/metactlrun"
)

// parentState is what the soak last asked of a parent.
type parentState struct {
	value   string
	inScope bool
}

// soak holds the run's clients and what it asked for.
type soak struct {
	o       options
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	hook    *hookServer
	metactl *metactlProcess

	state   map[string]*parentState // parent name -> what it should be
	next    int                     // for fresh parent names
	ops     map[string]int          // churn operations done, by kind
	samples []sample
	began   time.Time
	// outOfScope counts objects metactl wrote for parents outside its
	// scope, seen at any sample.
	outOfScope  int
	convergedIn time.Duration
}

// createParent creates a parent with a fresh name, in the controller's
// scope or not.
func (s *soak) createParent(ctx context.Context, inScope bool) error {
	s.next++
	name := fmt.Sprintf("p-%d", s.next)
	scope := "in"
	if !inScope {
		name, scope = fmt.Sprintf("out-%d", s.next), "out"
	}
	value := strconv.Itoa(rand.IntN(1_000_000))
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": parentGVR.GroupVersion().String(), "kind": "SoakParent",
		"metadata": map[string]any{"name": name, "namespace": namespace, "labels": map[string]any{"soak": scope}},
		"spec":     map[string]any{"value": value},
	}}
	if _, err := s.dyn.Resource(parentGVR).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating parent %s: %w", name, err)
	}
	s.state[name] = &parentState{value: value, inScope: inScope}
	return nil
}

// pick returns a random parent name in or out of scope, "" if none.
func (s *soak) pick(inScope bool) string {
	var names []string
	for n, p := range s.state {
		if p.inScope == inScope {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[rand.IntN(len(names))]
}

func (s *soak) count(inScope bool) int {
	n := 0
	for _, p := range s.state {
		if p.inScope == inScope {
			n++
		}
	}
	return n
}

// churnOnce does one random operation.
func (s *soak) churnOnce(ctx context.Context) error {
	parents := s.dyn.Resource(parentGVR).Namespace(namespace)
	cms := s.kube.CoreV1().ConfigMaps(namespace)
	r := rand.IntN(100)
	inScope := s.count(true)
	var kind string
	var err error
	switch {
	case r < 35: // update a parent's spec
		kind = "parent update"
		if name := s.pick(true); name != "" {
			value := strconv.Itoa(rand.IntN(1_000_000))
			patch := fmt.Sprintf(`{"spec":{"value":%q}}`, value)
			if _, err = parents.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
				s.state[name].value = value
			}
		}
	case r < 55: // create or delete a parent, keeping near -parents
		if inScope < s.o.parents || (inScope <= s.o.parents && rand.IntN(2) == 0) {
			kind = "parent create"
			err = s.createParent(ctx, true)
		} else {
			kind = "parent delete"
			name := s.pick(true)
			if err = parents.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
				delete(s.state, name)
			}
		}
	case r < 70: // a child edited by someone else: metactl restores it
		kind = "child edit"
		if name := s.pick(true); name != "" {
			patch := `{"data":{"value":"tampered"}}`
			_, err = cms.Patch(ctx, childName(name, rand.IntN(childrenPerParent)), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	case r < 85: // a child deleted by someone else: metactl recreates it
		kind = "child delete"
		if name := s.pick(true); name != "" {
			err = cms.Delete(ctx, childName(name, rand.IntN(childrenPerParent)), metav1.DeleteOptions{})
		}
	default: // parents outside the controller's scope: never touched
		switch name := s.pick(false); {
		case name == "" || (s.count(false) < s.o.parents/5 && rand.IntN(2) == 0):
			kind = "out-of-scope create"
			err = s.createParent(ctx, false)
		case rand.IntN(2) == 0:
			kind = "out-of-scope update"
			patch := fmt.Sprintf(`{"spec":{"value":"%d"}}`, rand.IntN(1_000_000))
			_, err = parents.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		default:
			kind = "out-of-scope delete"
			if err = parents.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
				delete(s.state, name)
			}
		}
	}
	// A child not created yet (its parent's hook keeps failing) is no
	// error of the soak's.
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	s.ops[kind]++
	return nil
}

// churnAndSample runs the churn for -duration, sampling metactl every
// -sample-every.
func (s *soak) churnAndSample(ctx context.Context) error {
	s.ops = map[string]int{}
	s.began = time.Now()
	end := s.began.Add(s.o.duration)
	if err := s.sample(ctx); err != nil {
		return err
	}
	nextSample := time.Now().Add(s.o.sampleEvery)
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.o.opsPerSecond))
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if err := s.churnOnce(ctx); err != nil {
			return err
		}
		if time.Now().After(nextSample) {
			nextSample = nextSample.Add(s.o.sampleEvery)
			if err := s.sample(ctx); err != nil {
				return err
			}
		}
	}
	if last := s.samples[len(s.samples)-1]; time.Since(s.began)-last.at < time.Second {
		return nil
	}
	return s.sample(ctx)
}

// sample is metactl's state at one moment.
type sample struct {
	at         time.Duration
	rss        int64
	goroutines float64
	fds        int
	sockets    int
	parents    int
	hookCalls  int64
	faults     int64
	writes     float64
	load       string
}

func (s *soak) sample(ctx context.Context) error {
	if err := s.metactl.Exited(); err != nil {
		return err
	}
	var x sample
	x.at = time.Since(s.began)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.metactl.PID))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "VmRSS" {
			if f := strings.Fields(v); len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				x.rss = kb * 1024
			}
		}
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", s.metactl.PID)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return err
	}
	x.fds = len(fds)
	for _, fd := range fds {
		if target, err := os.Readlink(fdDir + "/" + fd.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			x.sockets++
		}
	}
	body, err := metactlrun.Get(ctx, s.metactl.MetricsURL)
	if err != nil {
		return fmt.Errorf("scraping metactl: %w", err)
	}
	metrics := parseMetrics(string(body))
	x.goroutines = metrics["go_goroutines"]
	x.writes = metrics["metactl_object_writes_total"]
	x.parents = s.count(true)
	x.hookCalls = s.hook.calls.Load()
	for _, n := range s.hook.injectedCounts() {
		x.faults += n
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		x.load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	n, err := s.outOfScopeWrites(ctx)
	if err != nil {
		return err
	}
	s.outOfScope = max(s.outOfScope, n)
	s.samples = append(s.samples, x)
	logf("sample %2d: t=%4.0fs rss=%5.1f MiB goroutines=%4.0f fds=%3d sockets=%3d parents=%d hook calls=%d faults=%d load %s",
		len(s.samples), x.at.Seconds(), float64(x.rss)/(1<<20), x.goroutines, x.fds, x.sockets, x.parents, x.hookCalls, x.faults, x.load)
	return nil
}

// parseMetrics sums each metric of a Prometheus text exposition over its
// labels.
func parseMetrics(text string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}

// outOfScopeWrites counts what metactl wrote for parents outside its
// scope: a status on an out-of-scope parent, or a ConfigMap named after
// one.
func (s *soak) outOfScopeWrites(ctx context.Context) (int, error) {
	parents, err := s.dyn.Resource(parentGVR).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: "soak=out"})
	if err != nil {
		return 0, fmt.Errorf("listing parents: %w", err)
	}
	n := 0
	for _, p := range parents.Items {
		if _, ok := p.Object["status"]; ok {
			n++
		}
	}
	cms, err := s.kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, "out-") {
			n++
		}
	}
	return n, nil
}

// problems lists how the cluster differs from what the soak asked for;
// with counts of children lost (missing or wrong), extra (left behind or
// duplicated) and written out of scope.
type problems struct {
	unsynced, lost, extra, outOfScope, unexpectedParents int
	examples                                             []string
}

func (p *problems) add(counter *int, format string, args ...any) {
	*counter++
	if len(p.examples) < 10 {
		p.examples = append(p.examples, fmt.Sprintf(format, args...))
	}
}

func (p problems) total() int {
	return p.unsynced + p.lost + p.extra + p.outOfScope + p.unexpectedParents
}

func (p problems) String() string {
	return fmt.Sprintf("%d parents unsynced, %d children lost or wrong, %d extra children, %d objects written out of scope, %d unexpected parents; e.g. %s",
		p.unsynced, p.lost, p.extra, p.outOfScope, p.unexpectedParents, strings.Join(p.examples, "; "))
}

func (s *soak) check(ctx context.Context) (problems, error) {
	var p problems
	list, err := s.dyn.Resource(parentGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return p, fmt.Errorf("listing parents: %w", err)
	}
	uids := map[string]types.UID{}
	for _, obj := range list.Items {
		name := obj.GetName()
		want, ok := s.state[name]
		if !ok {
			p.add(&p.unexpectedParents, "parent %s exists, deleted by the soak", name)
			continue
		}
		uids[name] = obj.GetUID()
		value, _, _ := unstructured.NestedString(obj.Object, "status", "value")
		_, hasStatus := obj.Object["status"]
		switch {
		case !want.inScope && hasStatus:
			p.add(&p.outOfScope, "out-of-scope parent %s has a status", name)
		case want.inScope && value != want.value:
			p.add(&p.unsynced, "parent %s: status.value %q, spec.value %q", name, value, want.value)
		}
	}
	for name := range s.state {
		if _, ok := uids[name]; !ok {
			p.add(&p.unexpectedParents, "parent %s is gone", name)
		}
	}
	cms, err := s.kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return p, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	seen := map[string]bool{}
	for _, cm := range cms.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		seen[cm.Name] = true
		parent := cm.Name
		if i := strings.LastIndexByte(cm.Name, '-'); i > 0 {
			parent = cm.Name[:i]
		}
		want, ok := s.state[parent]
		switch {
		case strings.HasPrefix(cm.Name, "out-"):
			p.add(&p.outOfScope, "ConfigMap %s of an out-of-scope parent", cm.Name)
		case !ok:
			p.add(&p.extra, "ConfigMap %s of a deleted parent", cm.Name)
		case cm.Data["value"] != want.value:
			p.add(&p.lost, "ConfigMap %s: value %q, want %q", cm.Name, cm.Data["value"], want.value)
		default:
			ref := metav1.GetControllerOf(&cm)
			if ref == nil || ref.UID != uids[parent] {
				p.add(&p.lost, "ConfigMap %s: not controlled by its parent (%v)", cm.Name, ref)
			}
		}
	}
	for name, want := range s.state {
		for k := range childrenPerParent {
			if want.inScope && !seen[childName(name, k)] {
				p.add(&p.lost, "ConfigMap %s missing", childName(name, k))
			}
		}
	}
	return p, nil
}

// waitConverged polls check until it finds nothing or within has passed,
// and returns the last problems.
func (s *soak) waitConverged(ctx context.Context, within time.Duration) (problems, error) {
	deadline := time.Now().Add(within)
	for {
		if err := s.metactl.Exited(); err != nil {
			return problems{}, err
		}
		p, err := s.check(ctx)
		if err != nil || p.total() == 0 || time.Now().After(deadline) {
			return p, err
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return p, err
		}
	}
}
