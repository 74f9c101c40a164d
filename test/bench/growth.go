package main

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"sort"
	"strings"
)

// growthPoint is what the growth plot shows of one run.
type growthPoint struct {
	N       int
	CPU     float64 // metactl's CPU seconds for create + update (median)
	PeakMiB float64 // metactl's peak RSS over the phases
}

// plotGrowth reads the results JSON files of runs at several N and writes
// to svgPath a plot of how metactl's CPU and peak memory grow with N,
// each against the straight line through the smallest run and the origin
// of its growth (CPU from 0, memory from the idle RSS): a run above that
// line grows faster than linearly.
func plotGrowth(jsonPaths []string, svgPath string) error {
	var points []growthPoint
	idleMiB := 0.0
	for _, path := range jsonPaths {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		r := &Result{}
		if err := json.Unmarshal(data, r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if r.SlowHookMs != 0 {
			return fmt.Errorf("%s: a run with a slow hook does not belong in a growth plot", path)
		}
		points = append(points, growthPoint{N: r.N, CPU: r.CreateUpdateCPUSeconds, PeakMiB: float64(r.MetactlAfterPhases.PeakRSSBytes) / (1 << 20)})
		if idle := float64(r.MetactlIdle.RSSBytes) / (1 << 20); idle > 0 && (idleMiB == 0 || idle < idleMiB) {
			idleMiB = idle
		}
	}
	if len(points) < 2 {
		return fmt.Errorf("-growth-from needs at least two results files")
	}
	sort.Slice(points, func(i, j int) bool { return points[i].N < points[j].N })
	return os.WriteFile(svgPath, []byte(growthSVG(points, idleMiB)), 0o644)
}

func growthSVG(points []growthPoint, idleMiB float64) string {
	const (
		panelW, panelH = 440, 320
		left, right    = 60, 20
		top, bottom    = 50, 60
	)
	width, height := 2*panelW, panelH
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&sb, `<text x="%d" y="20" text-anchor="middle" font-size="14" font-weight="bold">metactl's cost as N grows (dashed: linear from the smallest run)</text>`+"\n", width/2)
	nmax := niceCeil(float64(points[len(points)-1].N))
	panel := func(pi int, title, unit string, value func(growthPoint) float64, base float64) {
		x0, y0 := float64(pi*panelW+left), float64(top)
		w, h := float64(panelW-left-right), float64(panelH-top-bottom)
		first := points[0]
		slope := (value(first) - base) / float64(first.N)
		ymax := 0.0
		for _, p := range points {
			ymax = max(ymax, value(p), base+slope*float64(p.N))
		}
		ymax = niceCeil(ymax * 1.05)
		sx := func(n float64) float64 { return x0 + n/nmax*w }
		sy := func(v float64) float64 { return y0 + h - v/ymax*h }
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`+"\n", x0+w/2, y0-10, html.EscapeString(title))
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, y0, w, h)
		for n := 0.0; n <= nmax+1e-9; n += niceStep(nmax / 5) {
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", sx(n), y0, sx(n), y0+h)
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(n), y0+h+16, trimFloat(n))
		}
		for v := 0.0; v <= ymax+1e-9; v += niceStep(ymax / 5) {
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x0, sy(v), x0+w, sy(v))
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, sy(v)+4, trimFloat(v))
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">parents (N)</text>`+"\n", x0+w/2, y0+h+34)
		fmt.Fprintf(&sb, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0-44, y0+h/2, unit)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e07b00" stroke-width="2" stroke-dasharray="6 4"/>`+"\n",
			sx(0), sy(base), sx(nmax), sy(base+slope*nmax))
		var pts []string
		for _, p := range points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(float64(p.N)), sy(value(p))))
		}
		fmt.Fprintf(&sb, `<polyline fill="none" stroke="#1f5fbf" stroke-width="2" points="%s"/>`+"\n", strings.Join(pts, " "))
		for _, p := range points {
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="3" fill="#1f5fbf"/>`+"\n", sx(float64(p.N)), sy(value(p)))
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", sx(float64(p.N))-5, sy(value(p))-6, trimFloat(value(p)))
		}
	}
	panel(0, "CPU for create + update", "metactl CPU-seconds", func(p growthPoint) float64 { return p.CPU }, 0)
	panel(1, "peak resident memory", "metactl peak RSS (MiB)", func(p growthPoint) float64 { return p.PeakMiB }, idleMiB)
	sb.WriteString("</svg>\n")
	return sb.String()
}
