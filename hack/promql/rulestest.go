package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// ruleTests is a file of alert rule tests, in the shape of promtool's
// `test rules` files (https://prometheus.io/docs/prometheus/latest/configuration/unit_testing_rules/)
// without rule_files (the rules come on stdin) and with one difference:
// an alert_rule_test without alertname checks every alert of every rule,
// so that exp_alerts lists all the alerts firing at eval_time (each with
// its alertname among exp_labels) and an empty exp_alerts says that none
// fires.
type ruleTests struct {
	// EvaluationInterval is how often the rules are evaluated (default
	// 1m), from time 0 to each eval_time.
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []ruleTest     `yaml:"tests"`
}

type ruleTest struct {
	Name string `yaml:"name"`
	// Interval is the step of input_series' values (default 1m).
	Interval    model.Duration `yaml:"interval"`
	InputSeries []struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	} `yaml:"input_series"`
	AlertRuleTests []struct {
		EvalTime  model.Duration `yaml:"eval_time"`
		Alertname string         `yaml:"alertname"`
		ExpAlerts []struct {
			ExpLabels      map[string]string `yaml:"exp_labels"`
			ExpAnnotations map[string]string `yaml:"exp_annotations"`
		} `yaml:"exp_alerts"`
	} `yaml:"alert_rule_test"`
}

// ruleTestResult is what -test-rules writes.
type ruleTestResult struct {
	// Checks is the number of alert_rule_test entries run.
	Checks   int      `json:"checks"`
	Failures []string `json:"failures"`
}

// testRules runs the tests of the file path against the rule groups on
// stdin and writes a ruleTestResult.
func testRules(path string) {
	groups, errs := readGroups()
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "promql: the rule groups on stdin:", errs)
		os.Exit(1)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql:", err)
		os.Exit(1)
	}
	var file ruleTests
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		fmt.Fprintf(os.Stderr, "promql: %s: %v\n", path, err)
		os.Exit(1)
	}
	step := time.Duration(file.EvaluationInterval)
	if step == 0 {
		step = time.Minute
	}
	out := ruleTestResult{Failures: []string{}}
	for _, t := range file.Tests {
		for _, f := range runRuleTest(t, groups.Groups, step, &out.Checks) {
			out.Failures = append(out.Failures, fmt.Sprintf("test %q: %s", t.Name, f))
		}
	}
	write(out)
}

// runRuleTest runs one test and returns its failures.
func runRuleTest(t ruleTest, groups []rulefmt.RuleGroup, step time.Duration, checks *int) []string {
	interval := time.Duration(t.Interval)
	if interval == 0 {
		interval = time.Minute
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", model.Duration(interval))
	for _, s := range t.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	var last time.Duration
	for _, a := range t.AlertRuleTests {
		last = max(last, time.Duration(a.EvalTime))
	}
	suite, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		return []string{fmt.Sprintf("input_series: %v", err)}
	}
	defer suite.Close()
	suite.SubqueryInterval = step
	var failures []string
	suite.WithSamplesTill(time.Unix(0, 0).UTC().Add(last), func(err error) {
		if err != nil {
			failures = append(failures, fmt.Sprintf("loading input_series: %v", err))
		}
	})
	if failures != nil {
		return failures
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	query := rules.EngineQueryFunc(suite.QueryEngine(), suite.Queryable())
	p := parser.NewParser(parser.Options{})
	for _, a := range t.AlertRuleTests {
		*checks++
		at := time.Duration(a.EvalTime)
		where := fmt.Sprintf("eval_time %s", model.Duration(at))
		if a.Alertname != "" {
			where += " alertname " + a.Alertname
		}
		// Fresh rules, evaluated at every step from 0 to eval_time, so
		// that for: counts as Prometheus counts it.
		var alerting []*rules.AlertingRule
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Alert == "" || a.Alertname != "" && r.Alert != a.Alertname {
					continue
				}
				expr, err := p.ParseExpr(r.Expr)
				if err != nil {
					failures = append(failures, fmt.Sprintf("alert %s: %v", r.Alert, err))
					continue
				}
				alerting = append(alerting, rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
					labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, logger))
			}
		}
		if a.Alertname != "" && len(alerting) == 0 {
			failures = append(failures, fmt.Sprintf("%s: no such alerting rule", where))
			continue
		}
		externalURL := &url.URL{Scheme: "http", Host: "prometheus.example"}
		for ts := time.Duration(0); ts <= at; ts += step {
			for _, r := range alerting {
				if _, err := r.Eval(context.Background(), 0, time.Unix(0, 0).UTC().Add(ts), query, externalURL, 0); err != nil {
					failures = append(failures, fmt.Sprintf("%s: alert %s at %s: %v", where, r.Name(), model.Duration(ts), err))
				}
			}
		}
		var got []string
		for _, r := range alerting {
			for _, alert := range r.ActiveAlerts() {
				if alert.State != rules.StateFiring {
					continue
				}
				got = append(got, alert.Labels.String())
				alert.Annotations.Range(func(l labels.Label) {
					if strings.Contains(l.Value, "error expanding template") || strings.Contains(l.Value, "error executing template") {
						failures = append(failures, fmt.Sprintf("%s: alert %s: annotation %s: %s", where, alert.Labels, l.Name, l.Value))
					}
				})
				for _, e := range a.ExpAlerts {
					if !matchesLabels(alert.Labels, e.ExpLabels, a.Alertname) {
						continue
					}
					for name, want := range e.ExpAnnotations {
						if v := alert.Annotations.Get(name); v != want {
							failures = append(failures, fmt.Sprintf("%s: alert %s: annotation %s is %q, want %q", where, alert.Labels, name, v, want))
						}
					}
				}
			}
		}
		var want []string
		for _, e := range a.ExpAlerts {
			m := map[string]string{}
			for k, v := range e.ExpLabels {
				m[k] = v
			}
			if a.Alertname != "" {
				m[labels.AlertName] = a.Alertname
			}
			want = append(want, labels.FromMap(m).String())
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			failures = append(failures, fmt.Sprintf("%s: firing\n      %s\n    want\n      %s", where, strings.Join(orNone(got), "\n      "), strings.Join(orNone(want), "\n      ")))
		}
	}
	return failures
}

// matchesLabels says whether an alert's labels are the expected ones.
func matchesLabels(got labels.Labels, want map[string]string, alertname string) bool {
	m := map[string]string{}
	for k, v := range want {
		m[k] = v
	}
	if alertname != "" {
		m[labels.AlertName] = alertname
	}
	return labels.Equal(got, labels.FromMap(m))
}

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"(none)"}
	}
	return s
}
