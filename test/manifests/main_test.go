package manifests_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
)

var env *testenv.Environment

func TestMain(m *testing.M) {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenv.Main(m, testenv.Options{
		// kube-controller-manager, whose clusterrole-aggregation controller
		// fills metactl-controllers from the ClusterRoles labelled for it,
		// as in a cluster.
		GarbageCollector: true,
		// The parent resource of the hello-world example, which the test
		// runs under the ServiceAccount's permissions.
		ExtraCRDPaths: []string{filepath.Join(root, "examples", "python", "hello-world", "crd.yaml")},
	}, &env)
}

const (
	namespace = "metactl-system"
	saName    = "metactl"
	// saUser is the user name of the metactl ServiceAccount.
	saUser = "system:serviceaccount:" + namespace + ":" + saName
	// aggregationLabel selects the ClusterRoles aggregated into
	// metactl-controllers.
	aggregationLabel = "metactl.io/aggregate-to-controller"
)

// repo returns a path in the repository.
func repo(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// kubectl runs the control plane's kubectl and fails the test on error.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// decodeAll splits a multi-document YAML stream into objects, failing the
// test on any document that does not decode strictly (a key twice in one
// map, as a label concatenated with another of the same key).
func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	reader := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading YAML: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.UnmarshalStrict(doc, &obj.Object); err != nil {
			t.Fatalf("a document does not decode strictly: %v\n%s", err, doc)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// impersonating returns a copy of env.Config acting as the metactl
// ServiceAccount.
func impersonating() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: saUser}
	return cfg
}

// impersonatingClient returns a clientset acting as the metactl
// ServiceAccount.
func impersonatingClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(impersonating())
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// yamlBlocks returns the fenced ```yaml blocks of a Markdown file, with the
// fence's indentation removed.
func yamlBlocks(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var block []string
	indent, in := "", false
	for line := range strings.SplitSeq(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```yaml":
			in, block = true, nil
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(block, "\n")+"\n")
		case in:
			block = append(block, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}
