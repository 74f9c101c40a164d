package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel kills a process started with SysProcAttr.Pdeathsig when the
// OS thread that started it exits, not when this process exits: a Go
// program's threads come and go (a goroutine locked to a thread that ends
// takes its thread with it). Every control-plane process is therefore
// started from one goroutine locked to its thread for the life of the
// process, so "the parent died" means "this process died", by a signal, a
// panic or SIGKILL alike.
var (
	spawnerOnce sync.Once
	spawner     chan func()
)

// onSpawnerThread runs f on the spawner thread and waits for it.
func onSpawnerThread(f func()) {
	spawnerOnce.Do(func() {
		spawner = make(chan func())
		go func() {
			// Never unlocked and never returning: the thread lives as long
			// as the process.
			runtime.LockOSThread()
			for g := range spawner {
				g()
			}
		}()
	})
	done := make(chan struct{})
	spawner <- func() {
		defer close(done)
		f()
	}
	<-done
}

// StartTied starts cmd in a process group of its own (so that stopping it
// ends anything it started too), killed by the kernel when this process
// dies, however it dies.
func StartTied(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var err error
	onSpawnerThread(func() { err = cmd.Start() })
	return err
}

// StopTied stops a process that StartTied started and that nothing else
// waits for: SIGTERM to its group, SIGKILL after grace; it returns once the
// process has ended.
func StopTied(grace time.Duration, cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stopGroups(grace, []*exec.Cmd{cmd}, []chan struct{}{done})
}

// stopGroups sends SIGTERM to the process groups of cmds, waits up to grace
// for each process to end (done is closed when its Wait returned), then
// kills what is left of each group.
func stopGroups(grace time.Duration, cmds []*exec.Cmd, done []chan struct{}) {
	for _, cmd := range cmds {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for i, cmd := range cmds {
		select {
		case <-done[i]:
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done[i]
		}
		// The leader is gone; a process it started may not be.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Stand-ins. envtest starts etcd and kube-apiserver itself, with no way to
// set Pdeathsig. With Options.TieToThisProcess, it is given this program's
// own executable under the binaries' names instead (symbolic links); run as
// such, RunStandIn sets Pdeathsig, checks that its parent still lives, and
// executes the real binary in place, keeping its PID.
const (
	standInDirEnv    = "METACTL_CONTROLPLANE_STAND_IN_FOR"
	standInParentEnv = "METACTL_CONTROLPLANE_STAND_IN_PARENT"
)

// standInBinaries are the binaries envtest starts.
var standInBinaries = []string{"etcd", "kube-apiserver"}

// RunStandIn must be the first call in main of a program that starts a
// control plane with Options.TieToThisProcess. When this process is a
// stand-in for a control-plane binary, it replaces itself with that binary
// and does not return (it exits on error); otherwise it returns at once.
func RunStandIn() {
	dir := os.Getenv(standInDirEnv)
	name := filepath.Base(os.Args[0])
	if dir == "" || !isStandIn(name) {
		return
	}
	parent, _ := strconv.Atoi(os.Getenv(standInParentEnv))
	// The parent-death signal is an attribute of the calling thread, and
	// execve keeps the executing thread's: both must happen on one thread,
	// or the signal is lost when the goroutine moves between them.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "%s stand-in: setting the parent-death signal: %v\n", name, err)
		os.Exit(1)
	}
	if os.Getppid() != parent { // the parent died before prctl took effect
		os.Exit(1)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, standInDirEnv+"=") && !strings.HasPrefix(kv, standInParentEnv+"=") {
			env = append(env, kv)
		}
	}
	real := filepath.Join(dir, name)
	err := syscall.Exec(real, append([]string{real}, os.Args[1:]...), env)
	fmt.Fprintf(os.Stderr, "%s stand-in: executing %s: %v\n", name, real, err)
	os.Exit(1)
}

func isStandIn(name string) bool {
	for _, b := range standInBinaries {
		if name == b {
			return true
		}
	}
	return false
}

// prepareStandIns links this program's executable under the names of the
// binaries envtest starts, in dir, and sets the environment that tells
// RunStandIn where the real ones are. It returns dir's paths by name.
func prepareStandIns(dir, assets string) (map[string]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating this program to stand in for etcd and kube-apiserver: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for _, b := range standInBinaries {
		p := filepath.Join(dir, b)
		if err := os.Symlink(self, p); err != nil {
			return nil, err
		}
		paths[b] = p
	}
	// Inherited by every process this one starts; only a stand-in reads it.
	if err := errors.Join(os.Setenv(standInDirEnv, assets), os.Setenv(standInParentEnv, strconv.Itoa(os.Getpid()))); err != nil {
		return nil, err
	}
	return paths, nil
}

// workDirPrefix names the temporary folder of each control plane; the PID
// of its owner follows, so that a later Start removes the folders of
// owners that died without Stop (SIGKILL).
const workDirPrefix = "metactl-cp-"

func newWorkDir() (string, error) {
	removeOrphanWorkDirs()
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", workDirPrefix, os.Getpid()))
}

// removeOrphanWorkDirs removes the temporary folders of control planes
// whose owning process is gone.
func removeOrphanWorkDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), workDirPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), workDirPrefix)
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}
