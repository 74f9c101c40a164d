package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/metactl/metactl/manifests"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configure a control plane.
type Options struct {
	// AssetsDir holds the binaries; default AssetsDir().
	AssetsDir string
	// GarbageCollector also starts kube-controller-manager with the garbage
	// collector and namespace controllers.
	GarbageCollector bool
	// ExtraCRDPaths are files or folders of further CRDs to install.
	ExtraCRDPaths []string
	// ExtraCRDs are further CRDs to install.
	ExtraCRDs []*apiextensionsv1.CustomResourceDefinition
	// Dir receives the kubeconfig and logs; default a new temporary folder,
	// removed by Stop.
	Dir string
}

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

	env      *envtest.Environment
	ownDir   bool
	kcm      *exec.Cmd
	kcmDone  chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start starts the control plane and installs metactl's CRDs and the extra
// ones. On error nothing is left running.
func Start(opts Options) (_ *ControlPlane, err error) {
	if opts.AssetsDir == "" {
		if opts.AssetsDir, err = AssetsDir(); err != nil {
			return nil, err
		}
	} else if err := checkAssets(opts.AssetsDir, "--assets"); err != nil {
		return nil, err
	}
	crds, err := manifests.CRDs()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{AssetsDir: opts.AssetsDir, Dir: opts.Dir}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "metactl-controlplane-"); err != nil {
			return nil, err
		}
		cp.ownDir = true
	} else if err := os.MkdirAll(cp.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()

	cp.env = &envtest.Environment{
		BinaryAssetsDirectory:    opts.AssetsDir,
		CRDs:                     append(crds, opts.ExtraCRDs...),
		CRDDirectoryPaths:        opts.ExtraCRDPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cp.env.ControlPlane.GetAPIServer().Configure().Set("bind-address", "127.0.0.1")
	if cp.Config, err = cp.env.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", opts.AssetsDir, err)
	}
	cp.KubeconfigPath = filepath.Join(cp.Dir, "kubeconfig")
	if err = os.WriteFile(cp.KubeconfigPath, cp.env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	if opts.GarbageCollector {
		if err = cp.startControllerManager(); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

func (cp *ControlPlane) startControllerManager() error {
	logFile, err := os.Create(filepath.Join(cp.Dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(cp.AssetsDir, "kube-controller-manager"),
		"--kubeconfig="+cp.KubeconfigPath,
		"--controllers=garbagecollector,namespace,clusterrole-aggregation",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--concurrent-gc-syncs=20",
		// The default 20 requests a second would make the garbage collector,
		// not metactl, the bottleneck of every deletion.
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--v=1",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with this process even if it dies without calling Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cp.kcm, cp.kcmDone = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(cp.kcmDone)
	}()
	return nil
}

// Stop stops every process of the control plane and removes its temporary
// folder. It is safe to call more than once and from several goroutines.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		if cp.kcm != nil {
			_ = cp.kcm.Process.Signal(syscall.SIGTERM)
			select {
			case <-cp.kcmDone:
			case <-time.After(10 * time.Second):
				_ = cp.kcm.Process.Kill()
				<-cp.kcmDone
			}
		}
		if cp.env != nil {
			if err := cp.env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
			}
		}
		if cp.ownDir {
			errs = append(errs, os.RemoveAll(cp.Dir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}
