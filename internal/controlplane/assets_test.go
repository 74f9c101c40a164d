package controlplane

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestVersionsMatchTheBuildScript(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "testenv.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"K8S_VERSION": KubernetesVersion, "ETCD_VERSION": EtcdVersion, "KWOK_VERSION": KwokVersion} {
		m := regexp.MustCompile(`(?m)^` + name + `=(\S+)$`).FindSubmatch(script)
		if m == nil || string(m[1]) != want {
			t.Errorf("hack/testenv.sh pins %s=%s, controlplane expects %s", name, m, want)
		}
	}
}

func TestMissingAssetsNameTheCommand(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := AssetsDir()
	if err == nil || !regexp.MustCompile(`make testenv`).MatchString(err.Error()) {
		t.Fatalf("AssetsDir() error = %v, want one naming `make testenv`", err)
	}
}
