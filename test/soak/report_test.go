package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func series(n int, f func(i int) float64) []sample {
	out := make([]sample, n)
	for i := range out {
		out[i] = sample{at: time.Duration(i) * 10 * time.Second, goroutines: f(i)}
	}
	return out
}

// The trend check fails a steady leak and passes a flat, noisy level and a
// single spike.
func TestTrend(t *testing.T) {
	l := trendLimit{name: "goroutines", relative: 0.20, absolute: 30, value: func(x sample) float64 { return x.goroutines }}
	r := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name    string
		samples []sample
		pass    bool
	}{
		{"flat with noise", series(31, func(int) float64 { return 130 + r.Float64()*20 }), true},
		{"one spike at the end", series(31, func(i int) float64 {
			if i == 30 {
				return 1000
			}
			return 130
		}), true},
		{"a leak of 3 per sample", series(31, func(i int) float64 { return 130 + 3*float64(i) }), false},
		{"growth that levelled off early", series(31, func(i int) float64 { return 130 + 10*float64(min(i, 5)) }), true},
	}
	for _, c := range cases {
		line, passed := trend(l, c.samples)
		if passed != c.pass {
			t.Errorf("%s: passed=%v, want %v: %s", c.name, passed, c.pass, line)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m := parseMetrics("# HELP go_goroutines x\ngo_goroutines 42\nmetactl_object_writes_total{verb=\"create\"} 3\nmetactl_object_writes_total{verb=\"update\"} 4\n")
	if m["go_goroutines"] != 42 || m["metactl_object_writes_total"] != 7 {
		t.Fatalf("parseMetrics: %v", m)
	}
}
