package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/metactl/metactl/test/internal/metactlrun"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// snapshot is a scrape of metactl's /metrics.
type snapshot []sample

// scrape reads url in the Prometheus text format. (It is parsed here rather
// than with prometheus/common/expfmt, which go.mod only has as an indirect
// dependency.)
func scrape(ctx context.Context, url string) (snapshot, error) {
	body, err := metactlrun.Get(ctx, url)
	if err != nil {
		return nil, err
	}
	return parseText(bytes.NewReader(body))
}

func parseText(r io.Reader) (snapshot, error) {
	var out snapshot
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// parseLine parses `name{k="v",...} value [timestamp]`.
func parseLine(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("metrics line %q: no value", line)
	}
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("metrics line %q: bad labels", line)
			}
			key := strings.TrimSpace(rest[:eq])
			rest = rest[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				val.WriteByte(rest[j])
			}
			if j >= len(rest) {
				return s, fmt.Errorf("metrics line %q: unterminated label value", line)
			}
			s.labels[key] = val.String()
			rest = rest[j+1:]
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("metrics line %q: no value", line)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		switch f[0] {
		case "+Inf":
			v = math.Inf(1)
		case "-Inf":
			v = math.Inf(-1)
		case "NaN":
			v = math.NaN()
		default:
			return s, fmt.Errorf("metrics line %q: %w", line, err)
		}
	}
	s.value = v
	return s, nil
}

// sum adds the samples called name whose labels match every pair of
// match ("" as a value matches anything).
func (s snapshot) sum(name string, match ...string) float64 {
	total := 0.0
	for _, x := range s {
		if x.name != name || !x.matches(match) {
			continue
		}
		total += x.value
	}
	return total
}

func (x sample) matches(match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		if x.labels[match[i]] != match[i+1] {
			return false
		}
	}
	return true
}

// by sums the samples called name by the value of the labels given,
// joined with "/".
func (s snapshot) by(name string, keys ...string) map[string]float64 {
	out := map[string]float64{}
	for _, x := range s {
		if x.name != name {
			continue
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = x.labels[k]
		}
		out[strings.Join(parts, "/")] += x.value
	}
	return out
}

// diffBy returns after - before for every key, dropping zeros.
func diffBy(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeVerbs are the HTTP methods that write.
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE"}

func (s snapshot) apiWrites() float64 {
	total := 0.0
	for _, v := range writeVerbs {
		total += s.sum("metactl_api_requests_total", "verb", v)
	}
	return total
}

// serverMetrics scrapes kube-apiserver's /metrics.
func (b *bench) serverMetrics(ctx context.Context) (snapshot, error) {
	data, err := b.jsonKube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseText(strings.NewReader(string(data)))
}

// serverWrites returns the write requests kube-apiserver served, by
// "VERB resource[/subresource]".
func serverWrites(s snapshot) map[string]float64 {
	out := map[string]float64{}
	for _, x := range s {
		if x.name != "apiserver_request_total" {
			continue
		}
		verb := x.labels["verb"]
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION":
		default:
			continue
		}
		key := verb + " " + x.labels["resource"]
		if sub := x.labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += x.value
	}
	return out
}

// hasMetric reports whether any sample is called name.
func (s snapshot) hasMetric(name string) bool {
	for _, x := range s {
		if x.name == name {
			return true
		}
	}
	return false
}

// goRuntimeGauges are the Go runtime's memory and goroutine gauges.
var goRuntimeGauges = []string{
	"go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
	"go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_memstats_next_gc_bytes",
}

func (s snapshot) goRuntime() map[string]float64 {
	out := map[string]float64{}
	for _, name := range goRuntimeGauges {
		if s.hasMetric(name) {
			out[name] = s.sum(name)
		}
	}
	return out
}

// watchEvents returns the watch events kube-apiserver sent between two
// scrapes, by resource, leaving out resources with fewer than 10 (the
// control plane's own background traffic).
func watchEvents(after, before snapshot) map[string]float64 {
	out := diffBy(after.by("apiserver_watch_events_total", "resource"), before.by("apiserver_watch_events_total", "resource"))
	for k, v := range out {
		if v < 10 {
			delete(out, k)
		}
	}
	return out
}
