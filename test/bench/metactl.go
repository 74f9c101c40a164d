package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// metactlProcess is `metactl run`, started with default flags apart from
// where it finds the cluster and where it serves metrics and health.
type metactlProcess struct {
	cmd        *exec.Cmd
	pid        int
	args       []string
	metricsURL string
	healthURL  string
	pprofURL   string
	done       chan struct{}
	waitErr    error
	log        *os.File
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startMetactl(ctx context.Context, bin, kubeconfig, logPath string, profile bool) (*metactlProcess, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	healthAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--kubeconfig", kubeconfig, "--metrics-addr", metricsAddr, "--health-addr", healthAddr}
	p := &metactlProcess{
		metricsURL: "http://" + metricsAddr + "/metrics",
		healthURL:  "http://" + healthAddr + "/readyz",
		done:       make(chan struct{}),
	}
	if profile {
		help, _ := exec.CommandContext(ctx, bin, "run", "--help").CombinedOutput()
		if strings.Contains(string(help), "--pprof-addr") {
			addr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			args = append(args, "--pprof-addr", addr)
			p.pprofURL = "http://" + addr + "/debug/pprof"
		} else {
			logf("metactl run has no --pprof-addr: no CPU profile")
		}
	}
	p.args = args
	if p.log, err = os.Create(logPath); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// Killed with this process even if it dies without stopping metactl.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("starting metactl: %w", err)
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	logf("metactl run: pid %d, metrics %s, log %s", p.pid, p.metricsURL, logPath)

	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := p.exited(); err != nil {
			return nil, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.healthURL, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("metactl not ready at %s within 2 minutes", p.healthURL)
		}
		select {
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exited returns an error once metactl has stopped.
func (p *metactlProcess) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("metactl exited: %v (see its log %s)", p.waitErr, p.log.Name())
	default:
		return nil
	}
}

// stop ends metactl: SIGTERM, then SIGKILL after 10 seconds.
func (p *metactlProcess) stop() {
	if p == nil || p.cmd == nil {
		return
	}
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.log.Close()
}

func (p *metactlProcess) scrape(ctx context.Context) (snapshot, error) {
	if err := p.exited(); err != nil {
		return nil, err
	}
	return scrape(ctx, p.metricsURL)
}

// activity is what settle watches: hook calls, API writes, syncs.
func activity(s snapshot) float64 {
	return s.sum("metactl_hook_requests_total") + s.apiWrites() + s.sum("metactl_syncs_total")
}

// settle waits until metactl is quiet: empty work queues, nothing in
// progress, and no hook call, API write or sync for a second. It returns
// the scrape taken then.
func (p *metactlProcess) settle(ctx context.Context, _ map[string]int) (snapshot, error) {
	const quiet = time.Second
	deadline := time.Now().Add(2 * time.Minute)
	var last float64 = -1
	stableSince := time.Now()
	for {
		s, err := p.scrape(ctx)
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

// profile saves a CPU profile of the next seconds to path.
func (p *metactlProcess) profile(ctx context.Context, seconds int, path string) error {
	if p.pprofURL == "" {
		return errors.New("no pprof endpoint")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fetchPprof(ctx, fmt.Sprintf("%s/profile?seconds=%d", p.pprofURL, seconds), f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fetchPprof writes what a pprof endpoint at url answers to w.
func fetchPprof(ctx context.Context, url string, w io.Writer) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: %s", resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// forceGC makes metactl collect garbage, through the heap profile's gc=1,
// so that its heap in use is its live heap; without pprof it does nothing.
func (p *metactlProcess) forceGC(ctx context.Context) {
	_ = p.heapProfile(ctx, io.Discard)
}

// heapProfile collects garbage in metactl and writes its heap profile (live
// objects, and every allocation since it started) to w.
func (p *metactlProcess) heapProfile(ctx context.Context, w io.Writer) error {
	if p.pprofURL == "" {
		return errors.New("no pprof endpoint")
	}
	return fetchPprof(ctx, p.pprofURL+"/heap?gc=1", w)
}

// saveHeapProfile writes metactl's heap profile to path.
func (p *metactlProcess) saveHeapProfile(ctx context.Context, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.heapProfile(ctx, f); err != nil {
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
		if err := b.metactl.exited(); err != nil {
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
