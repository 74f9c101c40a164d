package manifests_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// externalMetrics are the metric names the alert rules and the dashboard
// may use that metactl's /metrics does not expose. Each must be explained
// in docs/monitoring.md's "External metrics".
var externalMetrics = map[string]string{
	// Recorded by Prometheus itself for every target it scrapes.
	"up": "Prometheus",
}

// runbookBase is the address every alert's runbook_url starts with: a
// section of docs/monitoring.md.
const runbookBase = "https://github.com/metactl/metactl/blob/main/docs/monitoring.md#"

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule
// that manifests/monitoring/prometheusrule.yaml may use: decoding it
// strictly into this type rejects a misspelt or misplaced field.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert         string            `json:"alert,omitempty"`
				Record        string            `json:"record,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// query is one PromQL expression of the monitoring files and where it is;
// label is, for a dashboard variable label_values(SELECTOR, LABEL), the
// LABEL its selector's metrics must carry.
type query struct {
	where, expr, label string
}

// readRules decodes manifests/monitoring/prometheusrule.yaml strictly.
func readRules(t *testing.T) *prometheusRule {
	t.Helper()
	data, err := os.ReadFile(repo(t, "manifests", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rule := &prometheusRule{}
	if err := yaml.UnmarshalStrict(data, rule); err != nil {
		t.Fatalf("prometheusrule.yaml does not decode strictly as a PrometheusRule: %v", err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Fatalf("prometheusrule.yaml is a %s %s", rule.APIVersion, rule.Kind)
	}
	return rule
}

// dashboardPanel is the part of a Grafana panel the checks read.
type dashboardPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboard struct {
	UID           string           `json:"uid"`
	SchemaVersion int              `json:"schemaVersion"`
	Panels        []dashboardPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) (*dashboard, []byte) {
	t.Helper()
	data, err := os.ReadFile(repo(t, "manifests", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{}
	if err := json.Unmarshal(data, d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d, data
}

// labelValues matches a Grafana variable query label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// leftoverVariable matches a Grafana variable reference ($name, ${name})
// or interval left in an expression once "$1" (label_replace's
// replacement) is taken out.
var leftoverVariable = regexp.MustCompile(`\$[A-Za-z_{]`)

// queries returns every PromQL expression of the alert rules and the
// dashboard (panel targets and variable queries), with the dashboard's
// variables replaced by values that keep it valid PromQL: its own
// variables (used in regular-expression matchers) by .*, Grafana's
// intervals by 5m.
func queries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, g := range readRules(t).Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, query{where: "rule " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	d, _ := readDashboard(t)
	var pairs []string
	for _, v := range d.Templating.List {
		pairs = append(pairs, "${"+v.Name+"}", ".*", "$"+v.Name, ".*")
	}
	// Longest first, so that $__rate_interval is not taken for $__rate.
	pairs = append([]string{"$__rate_interval", "5m", "$__interval", "5m", "$__range", "5m"}, pairs...)
	substitute := strings.NewReplacer(pairs...)
	var walk func(panels []dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("panel %d %q", p.ID, p.Title), expr: substitute.Replace(target.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, v.Definition)
			continue
		}
		out = append(out, query{where: "variable " + v.Name, expr: substitute.Replace(m[1]), label: m[2]})
	}
	for _, q := range out {
		if leftoverVariable.MatchString(strings.ReplaceAll(q.expr, "$1", "")) {
			t.Errorf("%s: a variable is left after substitution: %s", q.where, q.expr)
		}
	}
	return out
}

// promqlResult is what hack/promql says of one expression.
type promqlResult struct {
	Expr    string   `json:"expr"`
	Error   string   `json:"error"`
	Metrics []string `json:"metrics"`
	// Labels are the labels it relies on: each must be on the series of
	// at least one of Metrics (or be a target label).
	Labels []labelUse `json:"labels"`
}

// labelUse is one label an expression relies on (see hack/promql).
type labelUse struct {
	Label   string   `json:"label"`
	Metrics []string `json:"metrics"`
	Where   string   `json:"where"`
}

// promqlTool returns the path of hack/promql, a PromQL and rule file
// checker on Prometheus's own packages, which hack/promql.sh builds (once,
// cached outside the repository) and prints.
func promqlTool(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	build := exec.CommandContext(ctx, repo(t, "hack", "promql.sh"))
	build.Stderr = &stderr
	path, err := build.Output()
	if err != nil {
		t.Fatalf("hack/promql.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(path))
}

// runPromQL runs hack/promql with args and input on stdin and decodes its
// JSON output into out.
func runPromQL(t *testing.T, input []byte, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, promqlTool(t), args...)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(input), &stderr
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/promql: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("hack/promql's output: %v\n%s", err, data)
	}
}

// checkPromQL parses each query with Prometheus's own parser (hack/promql)
// and returns what it says of each: the metric names it selects and the
// labels it relies on (a variable's label_values LABEL added, on each of
// its metrics), failing the test for any that does not parse or selects
// none.
func checkPromQL(t *testing.T, qs []query) []promqlResult {
	t.Helper()
	exprs := make([]string, len(qs))
	for i, q := range qs {
		exprs[i] = q.expr
	}
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	var results []promqlResult
	runPromQL(t, in, &results)
	if len(results) != len(qs) {
		t.Fatalf("hack/promql answered %d results for %d expressions", len(results), len(qs))
	}
	for i, r := range results {
		switch {
		case r.Error != "":
			t.Errorf("%s: %s\n  %s", qs[i].where, r.Error, qs[i].expr)
		case len(r.Metrics) == 0:
			t.Errorf("%s selects no metric: %s", qs[i].where, qs[i].expr)
		}
		if qs[i].label != "" {
			for _, m := range r.Metrics {
				results[i].Labels = append(results[i].Labels, labelUse{Label: qs[i].label, Metrics: []string{m}, Where: "label_values"})
			}
		}
	}
	return results
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, spaces to hyphens, punctuation other than
// hyphens and underscores dropped.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range text {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

// TestMonitoringRulesAndDashboard checks manifests/monitoring statically:
// the rule file decodes strictly as a PrometheusRule whose every alert has
// a severity, a for, a summary, a description and a runbook_url naming a
// section of docs/monitoring.md that exists; every expression of the rules
// and the dashboard parses and names its metrics; the dashboard's panel
// ids are unique and each panel is placed; the kustomization ships the
// dashboard unchanged in the ConfigMap Grafana's sidecar loads
// (TestSelectorsSelect checks that the ServiceMonitor selects the metrics
// Service by a port it has).
func TestMonitoringRulesAndDashboard(t *testing.T) {
	anchors := headingAnchors(t, repo(t, "docs", "monitoring.md"))
	rules := readRules(t)
	alerts := 0
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, s)
			}
			if r.For == "" {
				t.Errorf("alert %s has no for", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, a)
				}
			}
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookBase)
			if !ok || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q is not %s<a heading of docs/monitoring.md>", r.Alert, url, runbookBase)
			}
			if anchor != strings.ToLower(r.Alert) {
				t.Errorf("alert %s: runbook_url's anchor %q is not its own section", r.Alert, anchor)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("prometheusrule.yaml has no alert")
	}
	// The groups as Prometheus loads them: durations, expressions, and the
	// labels' and annotations' templates (functions included).
	groups, err := yaml.Marshal(rules.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var ruleErrors []string
	runPromQL(t, groups, &ruleErrors, "-rules")
	for _, e := range ruleErrors {
		t.Errorf("prometheusrule.yaml's groups, as Prometheus loads them: %s", e)
	}

	checkPromQL(t, queries(t))

	d, data := readDashboard(t)
	if d.UID == "" || d.SchemaVersion < 36 {
		t.Errorf("dashboard: uid %q, schemaVersion %d", d.UID, d.SchemaVersion)
	}
	ids := map[int]string{}
	var walk func(panels []dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			if other, ok := ids[p.ID]; ok || p.ID == 0 {
				t.Errorf("dashboard panel %q: id %d is missing or also %q's", p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("dashboard panel %d %q: gridPos %+v", p.ID, p.Title, p.GridPos)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("dashboard panel %d %q has no query", p.ID, p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	// Every row holds panels that query something: the panels after it up
	// to the next row, or a collapsed row's own panels.
	queriesOf := func(p dashboardPanel) int {
		n := len(p.Targets)
		for _, c := range p.Panels {
			n += len(c.Targets)
		}
		return n
	}
	var rows []string
	perRow := map[string]int{}
	total, row := 0, ""
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = fmt.Sprintf("%d %q", p.ID, p.Title)
			rows = append(rows, row)
		}
		if row != "" {
			perRow[row] += queriesOf(p)
		}
		total += queriesOf(p)
	}
	if total == 0 {
		t.Error("the dashboard has no query")
	}
	for _, r := range rows {
		if perRow[r] == 0 {
			t.Errorf("dashboard row %s has no panel with a query", r)
		}
	}
	hasDatasource := false
	for _, v := range d.Templating.List {
		hasDatasource = hasDatasource || v.Type == "datasource" && v.Name == "datasource"
	}
	if !hasDatasource {
		t.Error("the dashboard has no datasource variable")
	}

	// What `kubectl apply -k manifests/monitoring` installs.
	objs := decodeAll(t, []byte(kubectl(t, "kustomize", repo(t, "manifests", "monitoring"))))
	cm := find(t, objs, "ConfigMap", namespace, "metactl-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap metactl-dashboard labels %v lack grafana_dashboard: \"1\"", cm.GetLabels())
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "metactl.json"); got != string(data) {
		t.Error("ConfigMap metactl-dashboard's metactl.json is not dashboard.json")
	}
	find(t, objs, "PrometheusRule", namespace, "metactl")
	find(t, objs, "ServiceMonitor", namespace, "metactl")
	// That it selects the metrics Service: TestSelectorsSelect.
}

// exposition is what a scrape of /metrics (Prometheus text format) says:
// the type of each family declared by a # TYPE line, and the label names
// of the series of each sample name (a histogram's are its _bucket, _sum
// and _count; its family name has no series).
type exposition struct {
	types  map[string]string
	series map[string]map[string]bool
}

// parseExposition reads a Prometheus text exposition.
func parseExposition(t *testing.T, text string) exposition {
	t.Helper()
	e := exposition{types: map[string]string{}, series: map[string]map[string]bool{}}
	for _, line := range strings.Split(text, "\n") {
		if fields := strings.Fields(line); len(fields) == 4 && fields[0] == "#" && fields[1] == "TYPE" {
			e.types[fields[2]] = fields[3]
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, braces := strings.Cut(line, "{")
		if !braces {
			name, _, _ = strings.Cut(line, " ")
		}
		labels := map[string]bool{}
		for braces && !strings.HasPrefix(rest, "}") {
			// rest is `label="value",...}`: the value has its quotes,
			// backslashes and newlines escaped.
			label, after, ok := strings.Cut(rest, `="`)
			if !ok {
				t.Fatalf("/metrics: a malformed series: %s", line)
			}
			labels[strings.TrimPrefix(label, ",")] = true
			i := 0
			for i < len(after) && after[i] != '"' {
				if after[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(after) {
				t.Fatalf("/metrics: a malformed series: %s", line)
			}
			rest = strings.TrimPrefix(after[i+1:], ",")
		}
		if e.series[name] == nil {
			e.series[name] = map[string]bool{}
		}
		for l := range labels {
			e.series[name][l] = true
		}
	}
	return e
}

// targetLabels are the labels a ServiceMonitor's scrape adds to every
// series (or may: container, service, endpoint), besides metactl's own.
var targetLabels = map[string]bool{
	"namespace": true, "job": true, "pod": true, "instance": true,
	"container": true, "service": true, "endpoint": true,
}

// TestMonitoringMetricsExist runs metactl with a CompositeController that
// syncs, creating a child, scrapes its /metrics and checks that every
// metric name every alert rule and dashboard query uses has series (or is
// one of externalMetrics; a histogram only through its _bucket, _sum and
// _count), and that every label a query relies on (matches, groups by,
// joins on, reads in label_replace) is on the series of one of the
// metrics it is used with or is a target label, so that renaming a
// metric or a label breaks this test rather than the alerts.
func TestMonitoringMetricsExist(t *testing.T) {
	qs := queries(t)
	results := checkPromQL(t, qs)
	used := map[string][]string{}
	for i, r := range results {
		for _, n := range r.Metrics {
			if !slices.Contains(used[n], qs[i].where) {
				used[n] = append(used[n], qs[i].where)
			}
		}
	}
	if len(used) == 0 {
		t.Fatal("the monitoring files use no metric")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hook := httptest.NewServer(http.HandlerFunc(helloWorldHook))
	t.Cleanup(hook.Close)
	ccs := env.Dynamic.Resource(v1alpha1.CompositeControllerResource)
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": "monitoring-hello"},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "example.metactl.io/v1", "resource": "helloworlds"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
		},
	}}
	if _, err := ccs.Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ccs.Delete(ctx, cc.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting CompositeController %s: %v", cc.GetName(), err)
		}
	})
	ns := env.CreateNamespace(t)
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.metactl.io/v1", "kind": "HelloWorld",
		"metadata": map[string]any{"name": "observed", "namespace": ns},
		"spec":     map[string]any{"who": "Prometheus"},
	}}
	if _, err := env.Dynamic.Resource(helloWorlds).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	healthAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	metactl := testenv.StartProcess(t, testenv.BuildMetactl(t), "run", "--allow-loopback-hooks", "--kubeconfig="+env.KubeconfigPath,
		"--metrics-addr="+metricsAddr, "--health-addr="+healthAddr)
	defer metactl.Stop(t, syscall.SIGTERM, 30*time.Second)

	// Series appear as the controller syncs: scrape until every name is
	// there, or, past a minute, report what is missing. The wait fails
	// the test when no scrape succeeds.
	var exposed exposition
	start := time.Now()
	testenv.Eventually(t, 90*time.Second, "a scrape of metactl's /metrics", func(ctx context.Context) (bool, error) {
		if exited, err := metactl.Exited(); exited {
			t.Fatalf("metactl exited: %v\n%s", err, testenv.LastLines(metactl.Output(), 40))
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		code, body, err := httpGet(ctx, "http://"+metricsAddr+"/metrics")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("GET /metrics: %d", code)
		}
		exposed = parseExposition(t, body)
		for name := range used {
			if exposed.series[name] == nil && externalMetrics[name] == "" {
				return time.Since(start) > time.Minute, nil
			}
		}
		return true, nil
	})
	for name := range externalMetrics {
		if exposed.types[name] != "" || exposed.series[name] != nil {
			t.Errorf("%s is listed as external but metactl exposes it", name)
		}
	}
	for name, where := range used {
		switch {
		case externalMetrics[name] != "":
		case exposed.types[name] == "histogram":
			t.Errorf("%s, used by %s, is a histogram: query its %s_bucket, _sum or _count", name, strings.Join(where, "; "), name)
		case exposed.series[name] == nil:
			t.Errorf("%s, used by %s, is not in metactl's /metrics", name, strings.Join(where, "; "))
		}
	}
	// The label check below goes over what hack/promql reports: it must
	// report the uses it is known to find (every alert groups by
	// controller or relabels name into it).
	uses := map[string]bool{}
	for _, r := range results {
		for _, u := range r.Labels {
			uses[u.Label] = true
		}
	}
	if !uses["controller"] || !uses["name"] {
		t.Fatalf("hack/promql reported the labels %v, want controller and name among them: it no longer finds labels", uses)
	}
	for i, r := range results {
		for _, u := range r.Labels {
			if targetLabels[u.Label] {
				continue
			}
			found := false
			for _, m := range u.Metrics {
				found = found || exposed.series[m][u.Label] || externalMetrics[m] != ""
			}
			if !found {
				t.Errorf("%s: label %q (%s) is on the series of none of %v: %s", qs[i].where, u.Label, u.Where, u.Metrics, qs[i].expr)
			}
		}
	}
}

// TestMonitoringAlertRules evaluates the alert rules of
// manifests/monitoring/prometheusrule.yaml over the synthetic series of
// manifests/monitoring/tests/alerts.yaml (hack/promql -test-rules, on
// Prometheus's PromQL engine), and checks that the tests catch a
// broken rule: each mutation below must make the named test fail.
func TestMonitoringAlertRules(t *testing.T) {
	tests := repo(t, "manifests", "monitoring", "tests", "alerts.yaml")
	data, err := os.ReadFile(tests)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []any `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	checks := 0
	for _, tc := range file.Tests {
		checks += len(tc.AlertRuleTest)
	}
	rules := readRules(t)
	run := func(spec any) ruleTestResult {
		t.Helper()
		groups, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var out ruleTestResult
		runPromQL(t, groups, &out, "-test-rules", tests)
		return out
	}
	out := run(rules.Spec)
	if out.Checks != checks || checks == 0 {
		t.Errorf("hack/promql ran %d checks, the file has %d", out.Checks, checks)
	}
	for _, f := range out.Failures {
		t.Errorf("manifests/monitoring/tests/alerts.yaml: %s", f)
	}

	for _, m := range []struct {
		alert, from, to string
		fails           string // a test's name
	}{
		{"MetactlHookErrors", `code!~"2..|304"`, `code!~"2.."`, "cached hook answers (304) are no hook errors; 500s are"},
		{"MetactlControllerNotReady", `== 0`, `== 1`, "an idle controller fires nothing"},
		{"MetactlHookLatencyNearTimeout", `> 0.8 *`, `> 0.9 *`, "a hook p99 of 9s fires with a 10s timeout, not with a 12s one"},
		{"MetactlRestarting", `>= 2`, `>= 3`, "two restarts in place fire; a replaced Pod does not"},
		{"MetactlNoLeader", `== 0`, `< 0`, "no leader fires"},
		{"MetactlSeveralLeaders", `> 1`, `> 2`, "several leaders fire"},
		{"MetactlWorkQueueLatencyHigh", `> 60`, `> 100`, "objects waiting 97s for a worker (p99) fire; 6s do not"},
	} {
		broken := readRules(t)
		changed := false
		for _, g := range broken.Spec.Groups {
			for j := range g.Rules {
				if r := &g.Rules[j]; r.Alert == m.alert && strings.Contains(r.Expr, m.from) {
					r.Expr, changed = strings.Replace(r.Expr, m.from, m.to, 1), true
				}
			}
		}
		if !changed {
			t.Errorf("alert %s has no %q to break", m.alert, m.from)
			continue
		}
		failed := false
		for _, f := range run(broken.Spec).Failures {
			failed = failed || strings.HasPrefix(f, fmt.Sprintf("test %q:", m.fails))
		}
		if !failed {
			t.Errorf("with %s's %q changed to %q, the test %q still passes", m.alert, m.from, m.to, m.fails)
		}
	}
}

// ruleTestResult is what hack/promql -test-rules writes.
type ruleTestResult struct {
	Checks   int      `json:"checks"`
	Failures []string `json:"failures"`
}
