// Command promql checks PromQL expressions for metactl's tests: it reads
// a JSON array of strings (expressions) on stdin and writes a JSON array
// of results, one per expression in the same order: the metric names the
// expression selects, or its parse error.
//
// It lives in a module of its own (hack/promql/go.mod) so that Prometheus
// never enters metactl's go.mod; hack/promql.sh builds it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

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
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "promql: reading a JSON array of expressions on stdin:", err)
		os.Exit(1)
	}
	out := make([]result, 0, len(exprs))
	for _, e := range exprs {
		out = append(out, check(e))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
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
