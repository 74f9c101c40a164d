// Command promql checks PromQL expressions for metactl's tests: it reads
// a JSON array of strings (expressions) on stdin and writes a JSON array
// of results, one per expression in the same order: the metric names the
// expression selects and the labels it relies on (see result), or its
// parse error.
//
// With the argument -rules it reads instead a Prometheus rule file (the
// groups of a PrometheusRule's spec) on stdin and checks it as Prometheus
// loads one (unknown fields, durations, expressions, label and annotation
// templates): it writes a JSON array of the errors, empty when none.
//
// With the arguments -test-rules FILE it reads the rule groups on stdin
// likewise and evaluates their alerting rules over the synthetic series
// of the test file FILE (see rulestest.go): it writes a JSON object with
// the number of checks run and the failures, empty when none.
//
// It lives in a module of its own (hack/promql/go.mod) so that Prometheus
// never enters metactl's go.mod; hack/promql.sh builds it.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// result is what the tool says of one expression.
type result struct {
	Expr    string   `json:"expr"`
	Error   string   `json:"error,omitempty"`
	Metrics []string `json:"metrics,omitempty"`
	// Labels are the labels the expression relies on, each with the
	// metrics that must carry it (at least one of them does, or the
	// scrape adds it as a target label): those its selectors match on
	// (one entry per metric), and those its aggregations group by, its
	// binary operations match on (on, ignoring, group_left/right) and
	// its label_replace and label_join read, each for the metrics of
	// its operand. A label made by a label_replace or label_join inside
	// the operand is not listed.
	Labels []labelUse `json:"labels,omitempty"`
}

// labelUse is one label an expression relies on.
type labelUse struct {
	Label   string   `json:"label"`
	Metrics []string `json:"metrics"`
	// Where says how: matcher, by, without, on, ignoring, group_left,
	// group_right, label_replace, label_join.
	Where string `json:"where"`
}

func main() {
	switch {
	case len(os.Args) == 2 && os.Args[1] == "-rules":
		checkRules()
		return
	case len(os.Args) == 3 && os.Args[1] == "-test-rules":
		testRules(os.Args[2])
		return
	case len(os.Args) != 1:
		fmt.Fprintln(os.Stderr, "usage: promql [-rules | -test-rules FILE] < input")
		os.Exit(1)
	}
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "promql: reading a JSON array of expressions on stdin:", err)
		os.Exit(1)
	}
	out := make([]result, 0, len(exprs))
	for _, e := range exprs {
		out = append(out, check(e))
	}
	write(out)
}

// readGroups reads and checks the rule file on stdin, as Prometheus loads
// one.
func readGroups() (*rulefmt.RuleGroups, []error) {
	content, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql:", err)
		os.Exit(1)
	}
	return rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(os.Stderr, nil)))
}

// checkRules checks the rule file on stdin and writes its errors.
func checkRules() {
	_, errs := readGroups()
	out := []string{}
	for _, err := range errs {
		out = append(out, err.Error())
	}
	write(out)
}

func write(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "promql:", err)
		os.Exit(1)
	}
}

// metricName is a metric name without UTF-8 quoting.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// check parses e and lists the metric names its selectors select (the
// name of each vector selector; a selector without one gives the values
// of its __name__ matchers: an equality, or a regular expression that is
// an alternation of literal names, a|b) and the labels it relies on.
func check(e string) result {
	r := result{Expr: e}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(e)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	w := &walker{}
	names, _ := w.walk(expr)
	if w.err != nil {
		r.Error = w.err.Error()
		return r
	}
	r.Metrics, r.Labels = names, w.uses
	return r
}

// walker collects the label uses of an expression.
type walker struct {
	uses []labelUse
	err  error
}

// use records that label must be on one of metrics, unless the operand
// made it (made) or selects no metric (a literal, vector(...)).
func (w *walker) use(label, where string, metrics []string, made map[string]bool) {
	if label == "" || label == labels.MetricName || made[label] || len(metrics) == 0 {
		return
	}
	w.uses = append(w.uses, labelUse{Label: label, Metrics: metrics, Where: where})
}

// walk returns the metric names node selects (sorted, unique) and the
// labels made inside it by label_replace or label_join.
func (w *walker) walk(node parser.Node) ([]string, map[string]bool) {
	if w.err != nil || node == nil {
		return nil, nil
	}
	switch n := node.(type) {
	case *parser.VectorSelector:
		names, err := selectorNames(n.LabelMatchers)
		if err != nil {
			w.err = err
			return nil, nil
		}
		for _, m := range n.LabelMatchers {
			for _, name := range names {
				w.use(m.Name, "matcher", []string{name}, nil)
			}
		}
		return names, nil
	case *parser.AggregateExpr:
		names, made := w.walk(n.Expr)
		w.walk(n.Param)
		where := "by"
		if n.Without {
			where = "without"
		}
		for _, l := range n.Grouping {
			w.use(l, where, names, made)
		}
		if n.Op == parser.COUNT_VALUES {
			if s, ok := n.Param.(*parser.StringLiteral); ok {
				made = union(made, map[string]bool{s.Val: true})
			}
		}
		return names, made
	case *parser.BinaryExpr:
		lnames, lmade := w.walk(n.LHS)
		rnames, rmade := w.walk(n.RHS)
		if vm := n.VectorMatching; vm != nil {
			for _, l := range vm.MatchingLabels {
				if vm.On {
					w.use(l, "on", lnames, lmade)
					w.use(l, "on", rnames, rmade)
				} else {
					w.use(l, "ignoring", merge(lnames, rnames), union(lmade, rmade))
				}
			}
			for _, l := range vm.Include {
				if vm.Card == parser.CardManyToOne {
					w.use(l, "group_left", rnames, rmade)
				} else {
					w.use(l, "group_right", lnames, lmade)
				}
			}
		}
		return merge(lnames, rnames), union(lmade, rmade)
	case *parser.Call:
		var names []string
		var made map[string]bool
		for _, a := range n.Args {
			an, am := w.walk(a)
			names, made = merge(names, an), union(made, am)
		}
		switch n.Func.Name {
		case "label_replace":
			// label_replace(v, dst, replacement, src, regex)
			if len(n.Args) == 5 {
				if src, ok := n.Args[3].(*parser.StringLiteral); ok {
					w.use(src.Val, "label_replace", names, made)
				}
				if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
					made = union(made, map[string]bool{dst.Val: true})
				}
			}
		case "label_join":
			// label_join(v, dst, separator, src...)
			for _, a := range n.Args[min(3, len(n.Args)):] {
				if src, ok := a.(*parser.StringLiteral); ok {
					w.use(src.Val, "label_join", names, made)
				}
			}
			if len(n.Args) >= 2 {
				if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
					made = union(made, map[string]bool{dst.Val: true})
				}
			}
		}
		return names, made
	case *parser.MatrixSelector:
		return w.walk(n.VectorSelector)
	case *parser.SubqueryExpr:
		return w.walk(n.Expr)
	case *parser.ParenExpr:
		return w.walk(n.Expr)
	case *parser.UnaryExpr:
		return w.walk(n.Expr)
	}
	return nil, nil // literals
}

// selectorNames returns the metric names a selector's matchers select.
func selectorNames(ms []*labels.Matcher) ([]string, error) {
	var names []string
	for _, m := range ms {
		if m.Name != labels.MetricName {
			continue
		}
		switch m.Type {
		case labels.MatchEqual:
			names = merge(names, []string{m.Value})
		case labels.MatchRegexp:
			alternatives := strings.Split(m.Value, "|")
			for _, a := range alternatives {
				if !metricName.MatchString(a) {
					return nil, fmt.Errorf("selector %v matches metric names by a regular expression other than an alternation of names (a|b): name them", ms)
				}
			}
			names = merge(names, alternatives)
		default:
			return nil, fmt.Errorf("selector %v matches metric names by an inequality: name them", ms)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("selector %v names no metric", ms)
	}
	return names, nil
}

// merge returns the sorted union of a and b, without duplicates.
func merge(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	sort.Strings(out)
	return slices.Compact(out)
}

// union returns the union of two sets; either may be nil.
func union(a, b map[string]bool) map[string]bool {
	if len(b) == 0 {
		return a
	}
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
