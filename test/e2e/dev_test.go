package e2e

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metactl/metactl/internal/testenv"
)

// TestDevHelloWorld runs the README's main command, `metactl dev --example
// hello-world` (what `make demo` runs), as a user would: from the
// repository root, as its own process. It waits for the kubeconfig the
// command writes, for the command to print how to use it, and for the
// example's outcome (the HelloWorld's ConfigMap child with the greeting,
// read through a client built from that kubeconfig), records every
// process dev started, sends SIGINT, and checks that dev exits 0 in time
// and that none of those processes (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok, the python3 hook) is
// left, nor its temporary folders, nor the API server's port.
func TestDevHelloWorld(t *testing.T) {
	d := startDev(t, "--example", "hello-world")
	kubeconfig := filepath.Join(d.dir, "kubeconfig")
	var client dynamic.Interface
	testenv.Eventually(t, 2*time.Minute, "metactl dev to write "+kubeconfig, func(context.Context) (bool, error) {
		if d.exited() {
			t.Fatalf("metactl dev exited early: %v", d.err)
		}
		config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return false, err
		}
		client, err = dynamic.NewForConfig(config)
		return err == nil, err
	})
	d.waitLine(t, time.Minute, "export KUBECONFIG="+kubeconfig)
	testenv.Eventually(t, 2*time.Minute, "the example's ConfigMap default/your-name-greeting to greet World", func(ctx context.Context) (bool, error) {
		if d.exited() {
			t.Fatalf("metactl dev exited early: %v", d.err)
		}
		cm, err := client.Resource(configmapsGVR).Namespace("default").Get(ctx, "your-name-greeting", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nestedString(cm, "data", "greeting") == "Hello, World!", nil
	})

	d.recordProcesses(t, clusterProcesses...)
	python := false
	for _, p := range d.started {
		python = python || strings.HasPrefix(p.argv0, "python")
	}
	if !python {
		t.Errorf("metactl dev runs no python process (the example's hook); it runs %v", procNames(d.started))
	}
	server := apiServerAddress(t, kubeconfig)

	d.interrupt(t, time.Minute)
	d.checkNothingLeft(t, 10*time.Second)
	if conn, err := net.DialTimeout("tcp", server, time.Second); err == nil {
		conn.Close()
		t.Errorf("the API server's address %s still accepts connections after metactl dev stopped", server)
	}
}

// proc identifies a process by PID and start time (PIDs are reused).
type proc struct {
	pid   int
	start string // field 22 of /proc/<pid>/stat
	argv0 string // base name of argv[0]
}

// alive reports whether the process still runs: same PID and start time,
// and not a zombie.
func (p proc) alive() bool {
	state, start, ok := procStat(p.pid)
	return ok && start == p.start && state != "Z" && state != "X"
}

// procStat returns a process's state and start time from /proc.
func procStat(pid int) (state, start string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return "", "", false
	}
	return fields[0], fields[19], true // fields 3 and 22
}

// descendants returns every process below pid, from the children lists of
// all its threads (a Go program starts processes from any thread).
func descendants(pid int) []proc {
	var out []proc
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(data)) {
			var child int
			if _, err := fmt.Sscan(field, &child); err != nil {
				continue
			}
			_, start, ok := procStat(child)
			if !ok {
				continue
			}
			argv0 := ""
			if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child)); err == nil {
				argv0 = filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0])
			}
			out = append(out, proc{pid: child, start: start, argv0: argv0})
			out = append(out, descendants(child)...)
		}
	}
	return out
}

// apiServerAddress returns host:port of the kubeconfig's server.
func apiServerAddress(t *testing.T, kubeconfig string) string {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(config.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
