package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/testenv"
)

// devRun is a `metactl dev` started by a test, its standard output going
// into a pipe the test reads, and its temporary folder ($TMPDIR) one of the
// test's own, so that what it leaves there can be seen.
type devRun struct {
	cmd    *exec.Cmd
	dir    string // --dir: kubeconfig and logs
	tmp    string // its $TMPDIR
	stdout io.ReadCloser
	lines  chan string // standard output, line by line
	stderr *testenv.SyncBuffer
	done   chan struct{}
	err    error
	// started lists the processes it started, once recorded.
	started []proc
}

// startDev runs `metactl dev` with args and registers a cleanup that
// stops it and kills whatever it left, failing the test for the latter.
func startDev(t *testing.T, args ...string) *devRun {
	t.Helper()
	return startDevIn(t, t.TempDir(), args...)
}

// startDevIn is startDev with tmp as $TMPDIR.
func startDevIn(t *testing.T, tmp string, args ...string) *devRun {
	t.Helper()
	metactl := testenv.BuildMetactlWithDev(t)
	statSources(t)
	d := &devRun{dir: t.TempDir(), tmp: tmp, lines: make(chan string, 100), stderr: &testenv.SyncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(metactl, append([]string{"dev", "--dir", d.dir}, args...)...)
	d.cmd.Dir = repo(t)
	d.cmd.Env = append(os.Environ(), "KUBEBUILDER_ASSETS="+env.AssetsDir, "TMPDIR="+d.tmp)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d.stdout = r
	d.cmd.Stdout, d.cmd.Stderr = w, d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close() // the child holds the only writing end
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	go func() {
		defer close(d.lines)
		scanner := bufio.NewScanner(r)
		for scanner.Scan() {
			d.lines <- scanner.Text()
		}
	}()
	t.Cleanup(func() {
		if !d.exited() {
			_ = d.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-d.done:
			case <-time.After(30 * time.Second):
				_ = d.cmd.Process.Kill()
				<-d.done
			}
		}
		for _, p := range d.started {
			if p.alive() {
				t.Errorf("cleanup: killing %s (pid %d), left by metactl dev", p.argv0, p.pid)
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
		_ = r.Close()
		if t.Failed() {
			t.Logf("standard error of metactl dev:\n%s", testenv.LastLines(d.stderr.String(), 60))
		}
	})
	return d
}

func (d *devRun) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// waitLine waits up to timeout for a line of standard output holding want.
func (d *devRun) waitLine(t *testing.T, timeout time.Duration, want string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				<-d.done
				t.Fatalf("metactl dev closed its output (%v) before printing %q", d.err, want)
			}
			if strings.Contains(line, want) {
				return
			}
		case <-deadline:
			t.Fatalf("metactl dev did not print %q within %v", want, timeout)
		}
	}
}

// recordProcesses records the processes metactl dev started, logs them,
// and checks that the cluster's are among them.
func (d *devRun) recordProcesses(t *testing.T, want ...string) {
	t.Helper()
	d.started = descendants(d.cmd.Process.Pid)
	t.Logf("processes of metactl dev: %s", strings.Join(procNames(d.started), " "))
	for _, w := range want {
		found := false
		for _, p := range d.started {
			found = found || p.argv0 == w
		}
		if !found {
			t.Errorf("metactl dev runs no %s process; it runs %v", w, procNames(d.started))
		}
	}
}

// procNames returns each process as argv0(pid).
func procNames(ps []proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s(%d)", p.argv0, p.pid))
	}
	return out
}

// interrupt sends metactl dev SIGINT and fails the test unless it exits
// with code 0 within timeout.
func (d *devRun) interrupt(t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("metactl dev after SIGINT: %v, want exit code 0", d.err)
		}
	case <-time.After(timeout):
		t.Fatalf("metactl dev did not exit within %v of SIGINT", timeout)
	}
}

// client returns a client built from the kubeconfig metactl dev wrote.
func (d *devRun) client(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(d.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// checkNothingLeft waits up to timeout for every process metactl dev
// started to be gone and for its temporary folders to be removed.
func (d *devRun) checkNothingLeft(t *testing.T, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, "every process metactl dev started to be gone, and its temporary folders", func(context.Context) (bool, error) {
		var left []string
		for _, p := range d.started {
			if p.alive() {
				left = append(left, fmt.Sprintf("%s(%d)", p.argv0, p.pid))
			}
		}
		entries, err := os.ReadDir(d.tmp)
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			left = append(left, filepath.Join(d.tmp, e.Name()))
		}
		if len(left) > 0 {
			return false, fmt.Errorf("still there: %v", left)
		}
		return true, nil
	})
}

var clusterProcesses = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// TestDevPipedInterrupted is `metactl dev | tee log` stopped with Ctrl-C:
// the terminal interrupts the whole pipeline, so the reading end of
// metactl dev's output is gone when it reacts to SIGINT (and writes that
// it is stopping). It must still stop every process it started and remove
// its temporary folders (envtest's too), and exit 0.
func TestDevPipedInterrupted(t *testing.T) {
	d := startDev(t)
	d.waitLine(t, 3*time.Minute, "metactl is running")
	d.recordProcesses(t, clusterProcesses...)

	_ = d.stdout.Close()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("metactl dev after its output closed and SIGINT: %v, want exit code 0", d.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("metactl dev did not exit within a minute of its output closing and SIGINT")
	}
	d.checkNothingLeft(t, 15*time.Second)
}

// TestDevPipeClosed is `metactl dev | head -n 3`: when the reader of its
// output goes away, metactl dev stops everything on its own, though it
// has nothing more to write.
func TestDevPipeClosed(t *testing.T) {
	d := startDev(t)
	d.waitLine(t, 3*time.Minute, "metactl is running")
	d.recordProcesses(t, clusterProcesses...)

	_ = d.stdout.Close()
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("metactl dev after its output closed: %v, want exit code 0", d.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("metactl dev did not stop within a minute of its output closing")
	}
	d.checkNothingLeft(t, 15*time.Second)
}

// TestDevKilled: even SIGKILL, which metactl dev cannot handle, takes
// every process it started with it; the temporary folder it leaves is
// removed by the next control plane started with the same $TMPDIR.
func TestDevKilled(t *testing.T) {
	d := startDev(t)
	d.waitLine(t, 3*time.Minute, "metactl is running")
	d.recordProcesses(t, clusterProcesses...)
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	testenv.Eventually(t, 15*time.Second, "every process metactl dev started to be gone", func(context.Context) (bool, error) {
		for _, p := range d.started {
			if p.alive() {
				return false, fmt.Errorf("%s(%d) still runs", p.argv0, p.pid)
			}
		}
		return true, nil
	})

	left, _ := filepath.Glob(filepath.Join(d.tmp, "metactl-cp-*"))
	if len(left) == 0 {
		t.Fatalf("metactl dev killed left no temporary folder in %s: nothing to check the sweep with", d.tmp)
	}

	next := startDevIn(t, d.tmp)
	next.waitLine(t, 3*time.Minute, "metactl is running")
	for _, dir := range left {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the temporary folder %s of the killed metactl dev is still there (%v) after the next one started", dir, err)
		}
	}
	next.recordProcesses(t, clusterProcesses...)
	if err := next.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-next.done
	next.checkNothingLeft(t, 15*time.Second)
}

// TestDevUnknownExample: a misspelt --example fails at once, before
// anything starts, listing the examples there are.
func TestDevUnknownExample(t *testing.T) {
	d := startDev(t, "--example", "helloworld")
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatal("metactl dev --example helloworld did not fail within 30s")
	}
	if d.err == nil {
		t.Error("metactl dev --example helloworld: exit code 0, want an error")
	}
	stderr := d.stderr.String()
	for _, want := range []string{`no example "helloworld"`, "hello-world", "indexed-job", "statefulset-like"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("metactl dev --example helloworld: error %q does not hold %q", strings.TrimSpace(stderr), want)
		}
	}
	if strings.Contains(stderr, "starting etcd") {
		t.Error("metactl dev started the control plane before checking --example")
	}
	d.checkNothingLeft(t, 15*time.Second)
}

// TestDevClusterRunsPods: in metactl dev, a Deployment gets its
// ReplicaSet and Pods, the Pods are scheduled on the fake node and become
// Ready, so the Deployment's readyReplicas reaches its replicas; a Job's
// Pod completes and the Job succeeds.
func TestDevClusterRunsPods(t *testing.T) {
	d := startDev(t)
	d.waitLine(t, 3*time.Minute, "metactl is running")
	kube := d.client(t)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: pod,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := pod.DeepCopy()
	job.Labels = nil
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := kube.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec:       batchv1.JobSpec{Template: *job},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, time.Minute, "Deployment web to have 3 ready replicas", func(ctx context.Context) (bool, error) {
		dep, err := kube.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if dep.Status.ReadyReplicas != 3 {
			return false, fmt.Errorf("readyReplicas %d", dep.Status.ReadyReplicas)
		}
		return true, nil
	})
	pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("Pod %s: node %q, phase %s; want scheduled and Running", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
	testenv.Eventually(t, time.Minute, "Job once to succeed", func(ctx context.Context) (bool, error) {
		j, err := kube.BatchV1().Jobs("default").Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.Succeeded != 1 {
			return false, fmt.Errorf("succeeded %d", j.Status.Succeeded)
		}
		return true, nil
	})
}

// statSources reads the source files of metactl and metactl-dev, which
// the tests build and run as processes, and the examples: the go command
// then records them
// among the test's inputs, and a change to any of them makes it run the
// tests again instead of reporting a cached pass.
func statSources(t *testing.T) {
	t.Helper()
	sourcesOnce.Do(func() {
		root := repo(t)
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if eq .Module.Path \"github.com/metactl/metactl\"}}{{.Dir}}|{{join .GoFiles \",\"}},{{join .EmbedFiles \",\"}}{{end}}{{end}}", "./cmd/metactl", "./cmd/metactl-dev")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			sourcesErr = fmt.Errorf("go list: %w", err)
			return
		}
		files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"), filepath.Join(root, "hack", "testenv.sh")}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			dir, names, _ := strings.Cut(line, "|")
			for _, name := range strings.Split(names, ",") {
				if name != "" {
					files = append(files, filepath.Join(dir, name))
				}
			}
		}
		// The examples' hooks and manifests, which metactl dev runs and applies.
		_ = filepath.WalkDir(filepath.Join(root, "examples"), func(path string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				files = append(files, path)
			}
			return err
		})
		for _, f := range files {
			if _, err := os.ReadFile(f); err != nil {
				sourcesErr = err
				return
			}
		}
	})
	if sourcesErr != nil {
		t.Fatal(sourcesErr)
	}
}

var (
	sourcesOnce sync.Once
	sourcesErr  error
)

// TestDevStopsWhenItsControlPlaneDies: when a process of its cluster dies
// (here kube-apiserver, killed from outside), metactl dev says so and
// stops, with an error, instead of going on without a cluster.
func TestDevStopsWhenItsControlPlaneDies(t *testing.T) {
	d := startDev(t)
	d.waitLine(t, 3*time.Minute, "metactl is running")
	d.recordProcesses(t, clusterProcesses...)
	killed := false
	for _, p := range d.started {
		if p.argv0 == "kube-apiserver" {
			if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatal("no kube-apiserver among the processes metactl dev started")
	}
	// Three missed checks, 2 s apart, then the stop.
	d.waitLine(t, 20*time.Second, "the control plane is gone")
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		t.Fatal("metactl dev still runs 20 s after saying its control plane is gone")
	}
	if d.err == nil {
		t.Error("metactl dev exited 0 after losing its control plane, want an error")
	}
	d.checkNothingLeft(t, 15*time.Second)
}

// TestDevWebsiteChildBecomesReady: in `metactl dev --example website`, the
// sample Website's Deployment child reaches readyReplicas equal to its
// replicas (Pods scheduled on the fake node and made Ready by kwok), and
// the Website's status, which the hook reads from that child, says so.
func TestDevWebsiteChildBecomesReady(t *testing.T) {
	d := startDev(t, "--example", "website")
	d.waitLine(t, 3*time.Minute, "metactl is running")
	config, err := clientcmd.BuildConfigFromFlags("", filepath.Join(d.dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	kube := d.client(t)
	websites := schema.GroupVersionResource{Group: "example.metactl.io", Version: "v1", Resource: "websites"}
	testenv.Eventually(t, 2*time.Minute, "the Website's Deployment child to have 2 of 2 ready replicas, and the Website to report them", func(ctx context.Context) (bool, error) {
		site, err := dyn.Resource(websites).Namespace("default").Get(ctx, "my-site", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		deps, err := kube.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var child *appsv1.Deployment
		for i := range deps.Items {
			if ref := metav1.GetControllerOf(&deps.Items[i]); ref != nil && ref.UID == site.GetUID() {
				child = &deps.Items[i]
			}
		}
		if child == nil {
			return false, fmt.Errorf("no Deployment controlled by Website my-site yet")
		}
		ready, _, _ := unstructured.NestedInt64(site.Object, "status", "readyReplicas")
		if child.Spec.Replicas == nil || *child.Spec.Replicas != 2 || child.Status.ReadyReplicas != 2 || ready != 2 {
			return false, fmt.Errorf("Deployment %s: readyReplicas %d of %v; Website status.readyReplicas %d", child.Name, child.Status.ReadyReplicas, child.Spec.Replicas, ready)
		}
		return true, nil
	})
}
