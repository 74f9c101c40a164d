package operations

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metactl/metactl/internal/testenv"
)

// documentedMetrics returns the metrics the README's Metrics section
// names, with the labels it gives (nil when it gives none); a name ending
// in * is a prefix.
func documentedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n### Metrics\n")
	if start < 0 {
		t.Fatal("README.md has no Metrics section")
	}
	section = section[start:]
	if end := strings.Index(section[1:], "\n#"); end > 0 {
		section = section[:end+1]
	}
	out := map[string][]string{}
	for _, m := range regexp.MustCompile("`(metactl_[a-z_*]+)(?:\\{([a-z_,]+)\\})?`").FindAllStringSubmatch(section, -1) {
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
			slices.Sort(labels)
		}
		out[m[1]] = labels
	}
	if len(out) < 10 {
		t.Fatalf("found only %d metrics in the README's Metrics section: %v", len(out), out)
	}
	return out
}

var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

// seriesLabels returns the sorted label names of a series "name{a="x",...}".
func seriesLabels(series string) []string {
	i := strings.IndexByte(series, '{')
	if i < 0 {
		return nil
	}
	var names []string
	for _, m := range labelName.FindAllStringSubmatch(series[i:], -1) {
		if m[1] != "le" && m[1] != "quantile" { // a histogram's or summary's own
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

func seriesName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// TestEveryDocumentedMetricIsRecorded runs a controller through creation,
// an adoption (an orphaned child) and a failing hook, then checks that
// every metric the README lists is served, with exactly the labels the
// README gives it.
func TestEveryDocumentedMetricIsRecorded(t *testing.T) {
	documented := documentedMetrics(t)
	ns := env.CreateNamespace(t)
	hook, _ := hookServer(t, childAnswer)
	createController(t, "documented", hook.URL, "secrets")
	_, metrics, _ := metactlRun(t)
	createParent(t, ns, "p1", "documented")
	waitChild(t, ns, "p1-child", 30*time.Second)

	// Orphan the child: metactl adopts it again (an uncached read of the
	// parent, then an ownership write).
	orphan := []byte(`{"metadata":{"ownerReferences":null}}`)
	if _, err := env.Kube.CoreV1().Secrets(ns).Patch(ctx(t), "p1-child", types.MergePatchType, orphan, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the child adopted again", func(ctx context.Context) (bool, error) {
		s, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "p1-child", metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(s) != nil, err
	})

	var samples map[string]float64
	testenv.Eventually(t, 30*time.Second, "every documented metric", func(context.Context) (bool, error) {
		var err error
		if samples, err = scrape(metrics); err != nil {
			return false, err
		}
		for name := range documented {
			found := false
			for series := range samples {
				n := seriesName(series)
				n = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
				found = found || n == name || (strings.HasSuffix(name, "*") && strings.HasPrefix(n, strings.TrimSuffix(name, "*")))
			}
			if !found {
				return false, &missing{name}
			}
		}
		return true, nil
	})
	for name, labels := range documented {
		if labels == nil {
			continue
		}
		for series := range samples {
			if n := seriesName(series); n == name || n == name+"_bucket" || n == name+"_count" || n == name+"_sum" {
				if got := seriesLabels(series); !slices.Equal(got, labels) {
					t.Errorf("%s has labels %v, the README says %v", series, got, labels)
				}
			}
		}
	}
	if sum(samples, "metactl_object_writes_total", `controller="documented"`, `target="ownership"`) < 1 {
		t.Error("the adoption was not counted as an ownership write")
	}
	if sum(samples, "metactl_uncached_reads_total", `controller="documented"`) < 1 {
		t.Error("the adoption's uncached read of the parent was not counted")
	}
}

type missing struct{ name string }

func (m *missing) Error() string { return "no series of " + m.name }
