// Command promql checks PromQL expressions for metactl's tests: it reads
// a JSON array of strings (expressions) on stdin and writes a JSON array
// of results, one per expression in the same order: the metric names the
// expression selects, or its parse error.
//
// With the argument -rules it reads instead a Prometheus rule file (the
// groups of a PrometheusRule's spec) on stdin and checks it as Prometheus
// loads one (unknown fields, durations, expressions, label and annotation
// templates): it writes a JSON array of the errors, empty when none.
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
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// result is what the tool says of one expression.
type result struct {
	Expr    string   `json:"expr"`
	Error   string   `json:"error,omitempty"`
	Metrics []string `json:"metrics,omitempty"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-rules" {
		checkRules()
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: promql [-rules] < input")
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

// checkRules checks the rule file on stdin and writes its errors.
func checkRules() {
	content, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql:", err)
		os.Exit(1)
	}
	_, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.NewTextHandler(os.Stderr, nil)))
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

// check parses e and lists the metric names its selectors select: the
// name of each vector selector (a selector without one, by __name__
// matchers only, gives the values of its equality matchers).
func check(e string) result {
	r := result{Expr: e}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(e)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	names := map[string]bool{}
	for _, sel := range parser.ExtractSelectors(expr) {
		named := false
		for _, m := range sel {
			if m.Name == labels.MetricName {
				if m.Type != labels.MatchEqual {
					r.Error = fmt.Sprintf("selector %v matches metric names by a regular expression or inequality: name them", sel)
					return r
				}
				names[m.Value], named = true, true
			}
		}
		if !named {
			r.Error = fmt.Sprintf("selector %v names no metric", sel)
			return r
		}
	}
	for n := range names {
		r.Metrics = append(r.Metrics, n)
	}
	sort.Strings(r.Metrics)
	return r
}
