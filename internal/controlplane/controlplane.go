package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/metactl/metactl/manifests"
)

// Options configure a control plane.
type Options struct {
	// AssetsDir holds the binaries; default AssetsDir().
	AssetsDir string
	// GarbageCollector also starts kube-controller-manager with the garbage
	// collector and namespace controllers.
	GarbageCollector bool
	// Cluster makes the control plane behave like a cluster with one node:
	// kube-controller-manager with all its default controllers (Deployments
	// get ReplicaSets and Pods, Jobs run, ...), kube-scheduler, and kwok
	// simulating a node, so that scheduled Pods become Running and Ready
	// without any container. It implies GarbageCollector.
	Cluster bool
	// TieToThisProcess has the kernel kill etcd and kube-apiserver too when
	// this process dies without Stop, by any cause (the other processes
	// always are). The program's main must call RunStandIn first.
	TieToThisProcess bool
	// ExtraCRDPaths are files or folders of further CRDs to install.
	ExtraCRDPaths []string
	// ExtraCRDs are further CRDs to install.
	ExtraCRDs []*apiextensionsv1.CustomResourceDefinition
	// Dir receives the kubeconfig and logs; default the temporary folder
	// that Stop removes.
	Dir string
	// APIServerFlags are further kube-apiserver flags, by name without
	// dashes (a test's audit log: "audit-log-path", "audit-policy-file").
	APIServerFlags map[string]string
}

// LogToKlog sends controller-runtime's log, which envtest logs through, to
// klog, unless the program set a logger for it before (the first one set
// stays). Without a logger, controller-runtime prints a warning with a
// goroutine stack at its first log line 30 seconds or more after the
// program started: the first thing `metactl dev` showed, after it built the
// control-plane binaries. Start calls it; a program may call it earlier.
func LogToKlog() {
	ctrllog.SetLogger(klog.Background())
}

// FakeNodeName is the name of the node that kwok simulates (Options.Cluster).
const FakeNodeName = "metactl-dev-node"

// ControlPlane is a running control plane.
type ControlPlane struct {
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for Config.
	KubeconfigPath string
	// AssetsDir holds the binaries.
	AssetsDir string
	// Dir holds the kubeconfig and logs.
	Dir string
	// WorkDir is the temporary folder of etcd's data and the certificates,
	// removed by Stop.
	WorkDir string

	env      *envtest.Environment
	procs    []*exec.Cmd // started by Start itself, in start order
	procDone []chan struct{}
	// stopping is set when Stop begins: processes exiting then are not
	// lost (see Lost).
	stopping atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// Start starts the control plane and installs metactl's CRDs and the extra
// ones. On error nothing is left running. envtest's logs go to klog (see
// LogToKlog).
func Start(opts Options) (_ *ControlPlane, err error) {
	LogToKlog()
	if opts.AssetsDir, err = checkedAssetsDir(opts); err != nil {
		return nil, err
	}
	crds, err := manifests.CRDs()
	if err != nil {
		return nil, err
	}
	cp, err := newControlPlane(opts.AssetsDir, opts.Dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()
	cp.env = newEnvironment(opts, append(crds, opts.ExtraCRDs...), cp.WorkDir)
	if err = prepareEnvironment(cp.env, cp.WorkDir, opts.AssetsDir, opts.TieToThisProcess); err != nil {
		return nil, err
	}
	if err = cp.startAPIServer(); err != nil {
		return nil, err
	}
	if err = cp.startControllers(opts.Cluster, opts.GarbageCollector); err != nil {
		return nil, err
	}
	return cp, nil
}

// checkedAssetsDir is the folder of the binaries opts' control plane
// runs, opts.AssetsDir or by default AssetsDir(), once checked to hold
// them.
func checkedAssetsDir(opts Options) (dir string, err error) {
	if opts.AssetsDir == "" {
		if dir, err = AssetsDir(); err != nil {
			return "", err
		}
	} else {
		// A folder given may hold only what this control plane runs (a
		// benchmark's on a machine without the build, test/bench).
		dir = opts.AssetsDir
		need := startBinaries
		if opts.GarbageCollector || opts.Cluster {
			need = append(slices.Clone(need), "kube-controller-manager")
		}
		if err := checkAssets(dir, "--assets", need); err != nil {
			return "", err
		}
	}
	if opts.Cluster {
		if err := checkAssets(dir, "the assets folder", clusterBinaries); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// newControlPlane returns a control plane, not started, running the
// binaries of assetsDir, with a new WorkDir and its Dir (default WorkDir)
// made. On error it leaves no folder it made.
func newControlPlane(assetsDir, dir string) (*ControlPlane, error) {
	cp := &ControlPlane{AssetsDir: assetsDir, Dir: dir}
	var err error
	if cp.WorkDir, err = newWorkDir(); err != nil {
		return nil, err
	}
	if cp.Dir == "" {
		cp.Dir = cp.WorkDir
	} else if err := os.MkdirAll(cp.Dir, 0o700); err != nil {
		_ = os.RemoveAll(cp.WorkDir)
		return nil, err
	}
	return cp, nil
}

// newEnvironment configures envtest to run the etcd and kube-apiserver of
// opts, installing crds and opts.ExtraCRDPaths, their data and
// certificates in workDir.
func newEnvironment(opts Options, crds []*apiextensionsv1.CustomResourceDefinition, workDir string) *envtest.Environment {
	env := &envtest.Environment{
		BinaryAssetsDirectory:    opts.AssetsDir,
		CRDs:                     crds,
		CRDDirectoryPaths:        opts.ExtraCRDPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Inside WorkDir rather than envtest's own temporary folders, so that
	// one removal cleans everything, also after an owner that died.
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(workDir, "etcd")}
	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.CertDir = filepath.Join(workDir, "apiserver")
	apiServer.Configure().Set("bind-address", "127.0.0.1")
	for k, v := range opts.APIServerFlags {
		apiServer.Configure().Set(k, v)
	}
	return env
}

// prepareEnvironment makes the certificates' folder of env and, to tie
// etcd and kube-apiserver to this process, has env run stand-ins of the
// binaries of assetsDir, in workDir.
func prepareEnvironment(env *envtest.Environment, workDir, assetsDir string, tieToThisProcess bool) error {
	apiServer := env.ControlPlane.GetAPIServer()
	if err := os.MkdirAll(apiServer.CertDir, 0o700); err != nil {
		return err
	}
	if !tieToThisProcess {
		return nil
	}
	paths, err := prepareStandIns(filepath.Join(workDir, "bin"), assetsDir)
	if err != nil {
		return err
	}
	env.ControlPlane.Etcd.Path = paths["etcd"]
	apiServer.Path = paths["kube-apiserver"]
	return nil
}

// startAPIServer starts etcd and kube-apiserver, installs the CRDs and
// writes the kubeconfig of cp.Config in cp.Dir.
func (cp *ControlPlane) startAPIServer() (err error) {
	onSpawnerThread(func() { cp.Config, err = cp.env.Start() })
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver from %s: %w", cp.AssetsDir, err)
	}
	// envtest makes serving certificates for webhooks in a temporary folder
	// of its own, unasked; metactl runs no webhook in the API server.
	// Removed now, the folder cannot outlive a process killed later.
	if err = os.RemoveAll(cp.env.WebhookInstallOptions.LocalServingCertDir); err != nil {
		return err
	}
	cp.KubeconfigPath = filepath.Join(cp.Dir, "kubeconfig")
	return os.WriteFile(cp.KubeconfigPath, cp.env.KubeConfig, 0o600)
}

// startControllers starts, past the API server, what makes it a cluster
// (startCluster) or only the garbage collector and namespace controllers
// of kube-controller-manager; neither when both are false.
func (cp *ControlPlane) startControllers(cluster, garbageCollector bool) error {
	switch {
	case cluster:
		return cp.startCluster()
	case garbageCollector:
		return cp.startProcess("kube-controller-manager", append(controllerManagerFlags(cp.KubeconfigPath),
			"--controllers=garbagecollector,namespace,clusterrole-aggregation")...)
	}
	return nil
}

// controllerManagerFlags are kube-controller-manager's flags but for the
// controllers it runs.
func controllerManagerFlags(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--concurrent-gc-syncs=20",
		// The default 20 requests a second would make the garbage collector,
		// not metactl, the bottleneck of every deletion.
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--v=1",
	}
}

// startCluster starts kube-controller-manager with its default
// controllers, kube-scheduler and kwok, and creates the node kwok
// simulates; it returns once that node is Ready.
func (cp *ControlPlane) startCluster() error {
	// The root CA that the root-ca-cert-publisher puts in every namespace
	// (kube-root-ca.crt), and the key envtest's API server verifies service
	// account tokens with, for the token controller.
	rootCA := filepath.Join(cp.WorkDir, "ca.crt")
	if err := os.WriteFile(rootCA, cp.Config.CAData, 0o600); err != nil {
		return err
	}
	saKey := filepath.Join(cp.env.ControlPlane.GetAPIServer().CertDir, "sa-signer.key")
	if err := cp.startProcess("kube-controller-manager", append(controllerManagerFlags(cp.KubeconfigPath),
		"--controllers=*",
		"--service-account-private-key-file="+saKey,
		"--root-ca-file="+rootCA,
	)...); err != nil {
		return err
	}
	if err := cp.startProcess("kube-scheduler",
		"--kubeconfig="+cp.KubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--v=1",
	); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kube.CoreV1().Nodes().Create(ctx, fakeNode(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the node %s that kwok simulates: %w", FakeNodeName, err)
	}
	// The stages hack/testenv.sh put next to kwok (the node becomes Ready
	// and renews its Lease; Pods become Running and Ready, Pods of Jobs
	// Succeeded), and not ~/.kwok/kwok.yaml.
	kwokConfig := filepath.Join(cp.AssetsDir, "kwok-stages.yaml")
	if err := cp.startProcess("kwok",
		"--kubeconfig="+cp.KubeconfigPath,
		"--config="+kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+fakeNodeAnnotation+"=fake",
		"--cidr=10.244.0.0/16",
		"--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=40",
	); err != nil {
		return err
	}
	kwokDone := cp.procDone[len(cp.procDone)-1]
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-kwokDone:
			return false, errors.New("kwok exited")
		default:
		}
		node, err := kube.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kwok to make the node %s Ready (log: %s): %w", FakeNodeName, filepath.Join(cp.Dir, "kwok.log"), err)
	}
	return nil
}

// fakeNodeAnnotation marks the nodes kwok manages.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

func fakeNode() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{fakeNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": FakeNodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     runtime.GOARCH,
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// startProcess starts one of the assets with args, logging to
// Dir/<name>.log, tied to this process (see StartTied).
func (cp *ControlPlane) startProcess(name string, args ...string) error {
	logFile, err := os.Create(filepath.Join(cp.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(cp.AssetsDir, name), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := StartTied(cmd); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	cp.procs, cp.procDone = append(cp.procs, cmd), append(cp.procDone, done)
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	return nil
}

// Stop stops every process of the control plane and removes its temporary
// folder. It is safe to call more than once and from several goroutines.
func (cp *ControlPlane) Stop() error {
	cp.stopping.Store(true)
	cp.stopOnce.Do(func() {
		var errs []error
		// The API server's clients first: it then stops without waiting for
		// their watches.
		stopGroups(10*time.Second, cp.procs, cp.procDone)
		if cp.env != nil {
			if err := cp.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
			}
		}
		if cp.WorkDir != "" {
			errs = append(errs, os.RemoveAll(cp.WorkDir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}
