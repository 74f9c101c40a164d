package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"go.yaml.in/yaml/v3"
)

// ruleTests is a file of alert rule tests, in the shape of promtool's
// `test rules` files (https://prometheus.io/docs/prometheus/latest/configuration/unit_testing_rules/)
// without rule_files (the rules come on stdin), without exp_annotations,
// and with one difference: an alert_rule_test without alertname checks
// every alert of every rule, so that exp_alerts lists all the alerts
// firing at eval_time (each with its alertname among exp_labels) and an
// empty exp_alerts says that none fires.
//
// The alerting rules are evaluated as Prometheus's rule manager does,
// without it (its package brings in the service discovery of every cloud):
// Prometheus's PromQL engine runs each expression at every
// evaluation_interval from time 0 over the input series, held in memory;
// an alert is active from the first evaluation that returns its label set
// until one does not, and fires once it has been active for the rule's
// for. Rule labels are added as written (not templated).
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
			ExpLabels map[string]string `yaml:"exp_labels"`
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
	p := parser.NewParser(parser.Options{})
	var series []storage.Series
	for _, in := range t.InputSeries {
		lset, values, err := p.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			return []string{fmt.Sprintf("input_series %s: %v", in.Series, err)}
		}
		var samples []chunks.Sample
		for i, v := range values {
			if v.Histogram != nil {
				return []string{fmt.Sprintf("input_series %s: native histograms are not supported", in.Series)}
			}
			if !v.Omitted {
				samples = append(samples, floatSample{t: (time.Duration(i) * interval).Milliseconds(), f: v.Value})
			}
		}
		series = append(series, storage.NewListSeries(lset, samples))
	}
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:               50_000_000,
		Timeout:                  time.Minute,
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		NoStepSubqueryIntervalFn: func(int64) int64 { return step.Milliseconds() },
	})
	defer engine.Close()
	queryable := storage.QueryableFunc(func(_, _ int64) (storage.Querier, error) {
		return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
			for _, s := range series {
				if matchAll(s.Labels(), ms) {
					out = append(out, s)
				}
			}
			return &listSeriesSet{series: out}
		}}, nil
	})

	var failures []string
	for _, a := range t.AlertRuleTests {
		*checks++
		at := time.Duration(a.EvalTime)
		where := fmt.Sprintf("eval_time %s", model.Duration(at))
		if a.Alertname != "" {
			where += " alertname " + a.Alertname
		}
		var got []string
		found := false
		for _, g := range groups {
			for _, r := range g.Rules {
				if r.Alert == "" || a.Alertname != "" && r.Alert != a.Alertname {
					continue
				}
				found = true
				firing, err := evalAlert(engine, queryable, r, step, at)
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: alert %s: %v", where, r.Alert, err))
				}
				got = append(got, firing...)
			}
		}
		if a.Alertname != "" && !found {
			failures = append(failures, fmt.Sprintf("%s: no such alerting rule", where))
			continue
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

// evalAlert evaluates the alerting rule r at every step from 0 to at and
// returns the label sets of its alerts firing at at.
func evalAlert(engine *promql.Engine, queryable storage.Queryable, r rulefmt.Rule, step, at time.Duration) ([]string, error) {
	activeAt := map[string]time.Duration{}
	for ts := time.Duration(0); ts <= at; ts += step {
		q, err := engine.NewInstantQuery(context.Background(), queryable, nil, r.Expr, time.Unix(0, 0).UTC().Add(ts))
		if err != nil {
			return nil, err
		}
		res := q.Exec(context.Background())
		q.Close()
		if res.Err != nil {
			return nil, fmt.Errorf("at %s: %w", model.Duration(ts), res.Err)
		}
		var vector promql.Vector
		switch v := res.Value.(type) {
		case promql.Vector:
			vector = v
		case promql.Scalar:
			vector = promql.Vector{{T: v.T, F: v.V}}
		default:
			return nil, fmt.Errorf("at %s: the expression gives a %s, not a vector", model.Duration(ts), res.Value.Type())
		}
		now := map[string]time.Duration{}
		for _, smpl := range vector {
			b := labels.NewBuilder(smpl.Metric)
			b.Del(labels.MetricName)
			for k, v := range r.Labels {
				b.Set(k, v)
			}
			b.Set(labels.AlertName, r.Alert)
			key := b.Labels().String()
			if _, dup := now[key]; dup {
				return nil, fmt.Errorf("at %s: two alerts with the labels %s", model.Duration(ts), key)
			}
			now[key] = ts
			if since, ok := activeAt[key]; ok {
				now[key] = since
			}
		}
		activeAt = now
	}
	var firing []string
	for key, since := range activeAt {
		if at-since >= time.Duration(r.For) {
			firing = append(firing, key)
		}
	}
	return firing, nil
}

// matchAll says whether lset matches every matcher.
func matchAll(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// listSeriesSet is a storage.SeriesSet over a slice.
type listSeriesSet struct {
	series []storage.Series
	i      int
}

func (s *listSeriesSet) Next() bool {
	if s.i >= len(s.series) {
		return false
	}
	s.i++
	return true
}
func (s *listSeriesSet) At() storage.Series                { return s.series[s.i-1] }
func (s *listSeriesSet) Err() error                        { return nil }
func (s *listSeriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is one float sample of an input series.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"(none)"}
	}
	return s
}
