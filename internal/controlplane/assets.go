package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// binaries are the files the cache of hack/testenv.sh holds for every
// control plane (AssetsDir checks them); startBinaries those that Start
// runs without Options.GarbageCollector or Cluster; clusterBinaries the
// further ones of Options.Cluster. hack/testenv.sh builds them all.
var (
	binaries        = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}
	startBinaries   = []string{"etcd", "kube-apiserver"}
	clusterBinaries = []string{"kube-scheduler", "kwok", "kwok-stages.yaml"}
)

// AssetsDir returns the folder holding the control-plane binaries:
// $KUBEBUILDER_ASSETS when set, else the cache folder that hack/testenv.sh
// builds into. It fails, naming the command to run, when a binary is missing.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	source := "$KUBEBUILDER_ASSETS"
	if dir == "" {
		var err error
		if dir, err = defaultAssetsDir(); err != nil {
			return "", fmt.Errorf("locating the control-plane binaries (set KUBEBUILDER_ASSETS or run `make testenv`): %w", err)
		}
		source = "the hack/testenv.sh cache"
	}
	return dir, checkAssets(dir, source, binaries)
}

// checkAssets fails, naming the command to run, when dir lacks one of names.
func checkAssets(dir, source string, names []string) error {
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("control-plane binary %s not found in %s (from %s): build them with `make testenv` (hack/testenv.sh): %w", b, dir, source, err)
		}
	}
	return nil
}

// The versions hack/testenv.sh builds; a test keeps the two in step.
const (
	KubernetesVersion = "1.36.3"
	EtcdVersion       = "3.6.16"
	KwokVersion       = "0.8.0"
)

// defaultAssetsDir computes the folder hack/testenv.sh builds into, from the
// versions it pins and the running Go version.
func defaultAssetsDir() (string, error) {
	cache := os.Getenv("METACTL_TESTENV_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "metactl", "testenv")
	}
	return filepath.Join(cache, fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s_%s", KubernetesVersion, EtcdVersion, KwokVersion, runtime.Version())), nil
}

// RepoRoot returns the root of the metactl repository: the nearest folder
// above the working directory that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
