package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error

	buildDevOnce sync.Once
	buildDevErr  error
)

// BuildMetactl builds the metactl binary from this tree, once per test
// binary, and returns its path.
func BuildMetactl(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = mkdirTemp(); buildErr == nil {
			buildErr = goBuild(buildDir, "metactl")
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "metactl")
}

// BuildMetactlWithDev builds metactl and, next to it, metactl-dev (the
// program `metactl dev` runs), once per test binary, and returns metactl's
// path.
func BuildMetactlWithDev(t testing.TB) string {
	t.Helper()
	metactl := BuildMetactl(t)
	buildDevOnce.Do(func() { buildDevErr = goBuild(buildDir, "metactl-dev") })
	if buildDevErr != nil {
		t.Fatal(buildDevErr)
	}
	return metactl
}

// goBuild builds ./cmd/<name> of this tree into dir.
func goBuild(dir, name string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, out)
	}
	return nil
}

// FreePort returns a free TCP port on the loopback interface.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Process is a child process of a test; its combined output is kept.
type Process struct {
	Cmd  *exec.Cmd
	out  SyncBuffer
	done chan struct{}
	err  error
}

// StartProcess starts name with args. The process is killed when the test
// ends (and by the kernel if the test binary dies first); its output is
// logged when the test failed.
func StartProcess(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	return StartCommand(t, exec.Command(name, args...))
}

// StartCommand is StartProcess for a command the caller prepared (its
// folder, environment). Its output goes to the Process; without a
// SysProcAttr of its own it is killed with the test binary.
func StartCommand(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	p.Cmd.Stdout, p.Cmd.Stderr = &p.out, &p.out
	if p.Cmd.SysProcAttr == nil {
		p.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("last output of %s:\n%s", filepath.Base(cmd.Path), LastLines(p.Output(), 60))
		}
	})
	return p
}

// Stop sends sig to the process and fails the test unless it exits with
// code 0 within timeout.
func (p *Process) Stop(t testing.TB, sig os.Signal, timeout time.Duration) {
	t.Helper()
	name := filepath.Base(p.Cmd.Path)
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %s: %v", name, err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("%s after %v: %v, want exit code 0", name, sig, p.err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s did not stop within %v of %v", name, timeout, sig)
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Output returns what the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Wait waits up to timeout for the process to exit and returns its exit
// error (nil for exit code 0); it fails the test on timeout.
func (p *Process) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.Cmd.Path, timeout)
		return nil
	}
}

// Exited reports whether the process has exited, and its exit error (nil
// for exit code 0) if so.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SyncBuffer is a bytes.Buffer safe for a writer and readers at once.
// The zero value is ready to use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
