package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadmeListsEveryMetric: README.md's "Metrics" section (with its
// subsection of the metrics with series only once it happens) names every
// metactl_* metric the registry has (the work queues' as
// metactl_workqueue_*), so that a new metric cannot be left out of it.
func TestReadmeListsEveryMetric(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	start := strings.Index(readme, "### Metrics")
	if start < 0 {
		t.Fatal("README.md has no Metrics section")
	}
	// To the next section of the same level or above: its subsections
	// (the metrics with series only once it happens) included.
	section := readme[start:]
	rest := section[len("### Metrics"):]
	for _, next := range []string{"\n### ", "\n## "} {
		if end := strings.Index(rest, next); end >= 0 {
			rest = rest[:end]
		}
	}
	section = section[:len("### Metrics")+len(rest)]
	fqName := regexp.MustCompile(`fqName: "([a-z_:]+)"`)
	descs := make(chan *prometheus.Desc, 1000)
	for _, c := range metactlCollectors() {
		c.Describe(descs)
	}
	close(descs)
	n := 0
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		n++
		name := m[1]
		if strings.HasPrefix(name, "metactl_workqueue_") {
			name = "metactl_workqueue_*"
		}
		if !strings.Contains(section, "`"+name) {
			t.Errorf("README.md's Metrics section does not name %s", name)
		}
	}
	if n < 20 {
		t.Errorf("%d metrics described, want every metactl metric", n)
	}
}
