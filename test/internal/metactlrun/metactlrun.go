package metactlrun

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
	"sync"
	"syscall"
	"time"

	"github.com/metactl/metactl/internal/controlplane"
)

// Options say which metactl to run and how.
type Options struct {
	// Bin is the metactl binary.
	Bin string
	// Kubeconfig reaches the cluster.
	Kubeconfig string
	// LogPath is where metactl's output goes (created or truncated).
	LogPath string
	// Pprof asks for --pprof-addr, when the binary has it (an older
	// build being compared may not).
	Pprof bool
	// Logf, when set, is told what was started and what was left out.
	Logf func(format string, args ...any)
	// ExtraArgs are appended to metactl run's arguments (the benchmark's
	// variants, e.g. --apply-strategy=server-side).
	ExtraArgs []string
	// Env is metactl's whole environment; nil inherits this process's.
	Env []string
}

// Process is a running `metactl run`.
type Process struct {
	// PID is metactl's process ID (and its process group's).
	PID int
	// Args are the arguments it was started with.
	Args []string
	// MetricsURL is its /metrics, HealthURL its /readyz, PprofURL its
	// /debug/pprof ("" without pprof).
	MetricsURL, HealthURL, PprofURL string
	// Log is its output file.
	Log *os.File

	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// FreeAddr returns a loopback address with a port free now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Start starts metactl and waits until it is ready.
func Start(ctx context.Context, o Options) (*Process, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	metricsAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	healthAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	p := &Process{
		Args:       []string{"run", "--allow-loopback-hooks", "--kubeconfig", o.Kubeconfig, "--metrics-addr", metricsAddr, "--health-addr", healthAddr},
		MetricsURL: "http://" + metricsAddr + "/metrics",
		HealthURL:  "http://" + healthAddr + "/readyz",
		done:       make(chan struct{}),
	}
	if o.Pprof {
		help, _ := exec.CommandContext(ctx, o.Bin, "run", "--help").CombinedOutput()
		if strings.Contains(string(help), "--pprof-addr") {
			addr, err := FreeAddr()
			if err != nil {
				return nil, err
			}
			p.Args = append(p.Args, "--pprof-addr", addr)
			p.PprofURL = "http://" + addr + "/debug/pprof"
		} else {
			logf("metactl run has no --pprof-addr: no profiles")
		}
	}
	p.Args = append(p.Args, o.ExtraArgs...)
	if p.Log, err = os.Create(o.LogPath); err != nil {
		return nil, err
	}
	p.cmd = exec.Command(o.Bin, p.Args...)
	p.cmd.Env = o.Env
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	if err := controlplane.StartTied(p.cmd); err != nil {
		p.Log.Close()
		return nil, fmt.Errorf("starting metactl: %w", err)
	}
	p.PID = p.cmd.Process.Pid
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	logf("metactl run: pid %d, metrics %s, log %s", p.PID, p.MetricsURL, o.LogPath)

	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := p.Exited(); err != nil {
			return nil, err
		}
		if _, err := Get(ctx, p.HealthURL); err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("metactl not ready at %s within 2 minutes", p.HealthURL)
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Exited returns an error once metactl has stopped, nil while it runs.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("metactl exited: %v (see its log %s)", p.waitErr, p.Log.Name())
	default:
		return nil
	}
}

// Stop ends metactl and its process group: SIGTERM, then SIGKILL after 10
// seconds. It is idempotent and accepts a nil Process.
func (p *Process) Stop() {
	if p == nil || p.cmd == nil {
		return
	}
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.PID, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-p.PID, syscall.SIGKILL)
				<-p.done
			}
		}
		p.Log.Close()
	})
}

// HeapProfile collects garbage in metactl and writes its heap profile
// (live objects, and every allocation since it started) to w.
func (p *Process) HeapProfile(ctx context.Context, w io.Writer) error {
	if p.PprofURL == "" {
		return errors.New("no pprof endpoint")
	}
	return Copy(ctx, p.PprofURL+"/heap?gc=1", w)
}

// Get returns the body of a 200 answer to a GET of url.
func Get(ctx context.Context, url string) ([]byte, error) {
	var b strings.Builder
	if err := Copy(ctx, url, &b); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// Copy writes the body of a 200 answer to a GET of url to w.
func Copy(ctx context.Context, url string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
