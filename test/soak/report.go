package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// A growth trend. The samples after the first fifth of the churn (the
// caches and connection pools reach their working size then) are judged
// together. A quantity grows when both
//   - a least-squares line through them rises by more than the tolerance
//     over their span, and
//   - the median of their second half exceeds the median of their first
//     half by more than half the tolerance (a steady rise moves the median
//     by half its total),
//
// so that neither one spike nor noise around a flat level fails the run,
// while a steady leak, however slow, does once it passes the tolerance.
type trendLimit struct {
	name     string
	relative float64 // share of the first half's median
	absolute float64 // plus this much, in the quantity's unit
	value    func(sample) float64
	unit     string
}

var trendLimits = []trendLimit{
	{"RSS", 0.20, 8, func(x sample) float64 { return float64(x.rss) / (1 << 20) }, "MiB"},
	{"goroutines", 0.20, 30, func(x sample) float64 { return x.goroutines }, ""},
	{"file descriptors", 0.20, 20, func(x sample) float64 { return float64(x.fds) }, ""},
	{"sockets", 0.20, 20, func(x sample) float64 { return float64(x.sockets) }, ""},
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fitRise returns how much a least-squares line through (t, y) rises from
// the first t to the last.
func fitRise(t, y []float64) float64 {
	n := float64(len(t))
	if n < 2 {
		return 0
	}
	var st, sy, stt, sty float64
	for i := range t {
		st += t[i]
		sy += y[i]
		stt += t[i] * t[i]
		sty += t[i] * y[i]
	}
	den := n*stt - st*st
	if den == 0 {
		return 0
	}
	slope := (n*sty - st*sy) / den
	return slope * (t[len(t)-1] - t[0])
}

// trend judges one quantity: its verdict line and whether it passed.
func trend(l trendLimit, samples []sample) (string, bool) {
	skip := len(samples) / 5
	kept := samples[skip:]
	if len(kept) < 4 {
		return fmt.Sprintf("SKIP %s: only %d samples after the warm-up (need 4; lengthen -duration or shorten -sample-every)", l.name, len(kept)), true
	}
	var t, y []float64
	for _, x := range kept {
		t = append(t, x.at.Seconds())
		y = append(y, l.value(x))
	}
	half := len(y) / 2
	first, second := median(y[:half]), median(y[half:])
	tolerance := first*l.relative + l.absolute
	rise := fitRise(t, y)
	grew := rise > tolerance && second-first > tolerance/2
	verdict := "PASS"
	if grew {
		verdict = "FAIL"
	}
	return fmt.Sprintf("%s %s: median %.1f%s in the first half, %.1f%s in the second; fitted rise %+.1f%s over %.0fs; tolerance %.1f%s",
		verdict, l.name, first, l.unit, second, l.unit, rise, l.unit, t[len(t)-1]-t[0], tolerance, l.unit), !grew
}

// report prints the samples and the verdicts, and returns whether all
// passed.
func (s *soak) report(p problems) bool {
	w := os.Stdout
	fmt.Fprintf(w, "\nsoak: %v of churn, %d parents in scope, hook failure rate %.2f, %.0f operations/s\n\n",
		s.o.duration, s.o.parents, s.o.failRate, s.o.opsPerSecond)
	fmt.Fprintln(w, "| t (s) | RSS (MiB) | goroutines | fds | sockets | parents | hook calls | faults injected | object writes | load (1, 5, 15 min) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range s.samples {
		fmt.Fprintf(w, "| %.0f | %.1f | %.0f | %d | %d | %d | %d | %d | %.0f | %s |\n",
			x.at.Seconds(), float64(x.rss)/(1<<20), x.goroutines, x.fds, x.sockets, x.parents, x.hookCalls, x.faults, x.writes, x.load)
	}
	var kinds []string
	for k := range s.ops {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var ops []string
	for _, k := range kinds {
		ops = append(ops, fmt.Sprintf("%s %d", k, s.ops[k]))
	}
	fmt.Fprintf(w, "\nchurn: %s\n", strings.Join(ops, ", "))
	inj := s.hook.injectedCounts()
	fmt.Fprintf(w, "faults injected: 500 %d, timeout %d, invalid JSON %d, slow %d (of %d hook calls; %d connections to the hook)\n",
		inj["500"], inj["timeout"], inj["invalid-json"], inj["slow"], s.hook.calls.Load(), s.hook.conns.Load())
	fmt.Fprintf(w, "metactl log: %s\n", s.metactl.Log.Name())
	if hp := s.metactl.heapProfiles; len(hp) == 2 {
		fmt.Fprintf(w, "what metactl's live heap gained: go tool pprof -sample_index=inuse_space -top -diff_base %s %s\n", hp[0], hp[1])
	}
	fmt.Fprintln(w)

	// The trend is judged on the churn's samples, not on the quiet one
	// taken after convergence.
	churn := s.samples
	if len(churn) > 1 {
		churn = churn[:len(churn)-1]
	}
	ok := true
	for _, l := range trendLimits {
		line, passed := trend(l, churn)
		fmt.Fprintln(w, line)
		ok = ok && passed
	}
	if p.total() == 0 {
		fmt.Fprintf(w, "PASS converged %.1fs after the churn stopped: every parent in scope synced, its %d children present and right, none lost, none left over, none written out of scope\n",
			s.convergedIn.Seconds(), childrenPerParent)
	} else {
		fmt.Fprintf(w, "FAIL not converged %v after the churn stopped: %v\n", s.o.convergeWithin, p)
		ok = false
	}
	if s.outOfScope == 0 {
		fmt.Fprintln(w, "PASS no object written for a parent outside the controller's scope at any sample")
	} else {
		fmt.Fprintf(w, "FAIL %d objects written for parents outside the controller's scope\n", s.outOfScope)
		ok = false
	}
	if ok {
		fmt.Fprintln(w, "PASS soak")
	} else {
		fmt.Fprintln(w, "FAIL soak")
	}
	return ok
}
