package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// plotSVG draws parents converged over time, metactl against the limit,
// one panel per phase (create, update).
func plotSVG(r *Result) string {
	const (
		panelW, panelH = 440, 300
		left, right    = 60, 20
		top, bottom    = 50, 50
	)
	phases := []string{"create", "update"}
	width := len(phases) * panelW
	height := panelH + 30
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	title := fmt.Sprintf("Parents converged over time, N=%d", r.N)
	if r.SlowHookMs > 0 {
		title += fmt.Sprintf(", hook %d ms per call", r.SlowHookMs)
	}
	title += fmt.Sprintf(" (%d CPUs, %s)", r.Machine.CPUs, r.Machine.CPUModel)
	fmt.Fprintf(&sb, `<text x="%d" y="20" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", width/2, html.EscapeString(title))

	for pi, phase := range phases {
		x0 := float64(pi*panelW + left)
		y0 := float64(top)
		w := float64(panelW - left - right)
		h := float64(panelH - top - bottom + 30)
		m, l := r.Metactl[phase], r.Limit[phase]
		xmax := 0.0
		for _, p := range []*PhaseResult{m, l} {
			if p != nil {
				xmax = math.Max(xmax, p.Seconds)
			}
		}
		xmax = niceCeil(xmax * 1.05)
		ymax := float64(r.N)
		sx := func(t float64) float64 { return x0 + t/xmax*w }
		sy := func(n float64) float64 { return y0 + h - n/ymax*h }

		// Frame, grid and ticks.
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text>`+"\n", x0+w/2, y0-10, phase)
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, y0, w, h)
		step := niceStep(xmax / 5)
		for t := 0.0; t <= xmax+1e-9; t += step {
			x := sx(t)
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, y0, x, y0+h)
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+h+16, trimFloat(t))
		}
		for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
			y := sy(frac * ymax)
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x0, y, x0+w, y)
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="end">%.0f</text>`+"\n", x0-6, y+4, frac*ymax)
		}
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">seconds since the first write</text>`+"\n", x0+w/2, y0+h+34)
		fmt.Fprintf(&sb, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">parents converged</text>`+"\n", x0-44, y0+h/2)

		// The lines, as steps.
		line := func(p *PhaseResult, color, dash string) {
			if p == nil || len(p.Series) == 0 {
				return
			}
			var pts []string
			prevY := 0.0
			for _, pt := range p.Series {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(pt[0]), sy(prevY)), fmt.Sprintf("%.1f,%.1f", sx(pt[0]), sy(pt[1])))
				prevY = pt[1]
			}
			fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="2" %s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		}
		line(l, "#e07b00", `stroke-dasharray="6 4"`)
		line(m, "#1f5fbf", "")

		// Legend.
		ly := y0 + h - 40
		lx := x0 + w - 170
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="160" height="38" fill="white" stroke="#ccc"/>`+"\n", lx-5, ly-12)
		label := func(p *PhaseResult, who string) string {
			if p == nil {
				return who + " (not run)"
			}
			return fmt.Sprintf("%s %.2f s", who, p.Seconds)
		}
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#1f5fbf" stroke-width="2"/>`+"\n", lx, ly, lx+24, ly)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+30, ly+4, html.EscapeString(label(m, "metactl")))
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e07b00" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", lx, ly+16, lx+24, ly+16)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+30, ly+20, html.EscapeString(label(l, "limit")))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// niceStep rounds a tick step to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
