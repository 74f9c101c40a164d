package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// umbrellaImportersAllowed may import client-go/kubernetes (the clientset
// of every API group) and client-go/informers (every group's informers):
// client-go's leader election, which metactl uses through
// resourcelock.LeaseLock on a narrow coordinationv1 client (its functions
// taking a clientset or an informer factory are not linked). The informer
// packages import one another.
var umbrellaImportersAllowed = []string{
	"k8s.io/client-go/tools/leaderelection",
	"k8s.io/client-go/tools/leaderelection/resourcelock",
}

func isUmbrella(pkg string) bool {
	return pkg == "k8s.io/client-go/kubernetes" || pkg == "k8s.io/client-go/informers" || strings.HasPrefix(pkg, "k8s.io/client-go/informers/")
}

func goTool(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, needed to list metactl's dependencies: %v", err)
	}
	return goBin
}

// TestNoUmbrellaClientset: no package of metactl's binary but client-go's
// leader election imports client-go/kubernetes or client-go/informers (or
// one group's informers), and the binary links no code of theirs. An
// umbrella clientset or informer factory links every API group's clients
// or informers, which grow the binary and its memory from start (most of
// the binary is resident); metactl takes the narrow typed clients it needs
// (corev1client, coordinationv1client, ...) and builds its informers with
// cache.NewSharedIndexInformer.
func TestNoUmbrellaClientset(t *testing.T) {
	goBin := goTool(t)
	out, err := exec.Command(goBin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || isUmbrella(fields[0]) || slices.Contains(umbrellaImportersAllowed, fields[0]) {
			continue
		}
		for _, imp := range fields[1:] {
			if isUmbrella(imp) {
				t.Errorf("%s imports %s: take the narrow typed client (e.g. corev1client.CoreV1Interface) or build the one informer with cache.NewSharedIndexInformer", fields[0], imp)
			}
		}
	}

	// What the linker keeps: a clientset built (kubernetes.NewForConfig)
	// or an informer factory links every group's clients or informers.
	bin := filepath.Join(t.TempDir(), "metactl")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err = exec.Command(goBin, "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, out)
	}
	var linked []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "k8s.io/client-go/kubernetes.") || strings.Contains(line, "k8s.io/client-go/informers.") || strings.Contains(line, "k8s.io/client-go/informers/") {
			linked = append(linked, strings.TrimSpace(line))
		}
	}
	if len(linked) > 0 {
		t.Errorf("metactl links %d symbols of %s, e.g.:\n%s", len(linked), "client-go/kubernetes or client-go/informers", strings.Join(linked[:min(len(linked), 10)], "\n"))
	}
}
