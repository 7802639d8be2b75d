package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/tollgate-dev/tollgate/samples/goodput/figures"
)

// Chart geometry, in SVG pixels.
const (
	chartWidth, chartHeight = 760, 180
	plotLeft, plotRight     = 50, 710
	plotTop, plotBottom     = 24, 150
)

// panel is one run's chart: its series on the group's common axes.
type panel struct {
	title    string
	level    []figures.Point // binding dimension's remaining, fraction of the bucket
	inFlight []figures.Point
	limited  []float64 // 429 arrivals
	minimum  float64   // theoretical minimum drain, s
	drain    float64
}

// panelOf returns r's panel.
func panelOf(r Result) panel {
	f := r.Figures
	over := ""
	if r.TimedOut {
		over = "≥ "
	}
	return panel{
		title: fmt.Sprintf("%s — drain %s%.1fs for a minimum of %.1fs (ratio %s%.3f), utilization %.3f of %s, %d × 429, interactive p99 %s",
			r.Spec.Strategy, over, f.Drain.Seconds(), f.Binding.Minimum.Seconds(), over, r.Row().DrainRatio, f.Utilization,
			f.Binding.Dimension, f.RateLimited, interactiveP99(r)),
		level:    figures.Level(r.Entries, f.Binding.Dimension, f.Binding.Capacity, f.First),
		inFlight: figures.InFlight(r.Entries, f.First),
		limited:  figures.RateLimited(r.Entries, f.First),
		minimum:  f.Binding.Minimum.Seconds(),
		drain:    f.Drain.Seconds(),
	}
}

// writeHTML writes a self-contained page with one panel per run, runs of a
// provider and bucket together on common axes.
func writeHTML(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>tollgate goodput</title>
<style>body{font-family:sans-serif;margin:2em}h2{margin-top:2em}p.t{margin:.8em 0 0;font-size:13px}
svg text{font-size:11px;font-family:sans-serif}</style></head><body>
<h1>Goodput: one workload, one quota, each strategy</h1>
<p>Per run, from the fake provider's record: <span style="color:#1f77b4">the remaining level of the binding dimension</span>
(fraction of its bucket, right after each admission decision), <span style="color:#ff7f0e">requests in flight at the provider</span>
(right axis), <span style="color:#d62728">429s</span> (ticks), the theoretical minimum drain (green dashes) and the drain (black).
Time in seconds from the first request.</p>
`)
	for _, g := range groups(results) {
		first := g[0]
		fmt.Fprintf(&b, "<h2>%s, %s buckets</h2><p>%s; %d batch calls, an interactive call every %v.</p>\n",
			html.EscapeString(first.Spec.Provider.Name), html.EscapeString(first.Spec.Bucket.Name),
			html.EscapeString(describe(first.Limits)), first.Spec.Workload.Calls, first.Spec.Workload.Every)
		panels := make([]panel, len(g))
		var maxT, maxInFlight float64 = 1, 1
		for i, r := range g {
			panels[i] = panelOf(r)
			maxT = math.Max(maxT, math.Max(panels[i].drain, lastT(panels[i].inFlight)))
			for _, p := range panels[i].inFlight {
				maxInFlight = math.Max(maxInFlight, p.V)
			}
		}
		for _, p := range panels {
			writePanel(&b, p, maxT, maxInFlight)
		}
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// groups splits results into runs of one provider and bucket, in order of
// first appearance.
func groups(results []Result) [][]Result {
	var out [][]Result
	index := map[string]int{}
	for _, r := range results {
		k := r.Spec.Provider.Name + "/" + r.Spec.Bucket.Name
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

func lastT(ps []figures.Point) float64 {
	if len(ps) == 0 {
		return 0
	}
	return ps[len(ps)-1].T
}

// writePanel draws one panel with time on [0, maxT] and in-flight on
// [0, maxInFlight].
func writePanel(b *strings.Builder, p panel, maxT, maxInFlight float64) {
	x := func(t float64) float64 { return plotLeft + (plotRight-plotLeft)*t/maxT }
	y := func(frac float64) float64 { return plotBottom - (plotBottom-plotTop)*math.Max(0, math.Min(1, frac)) }
	fmt.Fprintf(b, "<p class=\"t\">%s</p>\n<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
		html.EscapeString(p.title), chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#ccc\"/>\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	step := tickStep(maxT)
	for t := 0.0; t <= maxT; t += step {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x(t), plotBottom+14, t)
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1</text><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">0</text>\n",
		plotLeft-4, y(1)+4, plotLeft-4, y(0)+4)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\">%g</text>\n", plotRight+4, y(1)+4, maxInFlight)
	writeSteps(b, p.level, x, y, 1, "#1f77b4")
	writeSteps(b, p.inFlight, x, y, maxInFlight, "#ff7f0e")
	for _, t := range p.limited {
		fmt.Fprintf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#d62728\"/>\n", x(t), x(t), plotBottom-8, plotBottom)
	}
	fmt.Fprintf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#2ca02c\" stroke-dasharray=\"4 3\"/>\n",
		x(p.minimum), x(p.minimum), plotTop, plotBottom)
	fmt.Fprintf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", x(p.drain), x(p.drain), plotTop, plotBottom)
	b.WriteString("</svg>\n")
}

// writeSteps draws ps as a step line, each value divided by scale.
func writeSteps(b *strings.Builder, ps []figures.Point, x, y func(float64) float64, scale float64, color string) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1\" points=\"", color)
	prev := ps[0].V / scale
	for i, p := range ps {
		v := p.V / scale
		if i > 0 {
			fmt.Fprintf(b, "%.1f,%.1f ", x(p.T), y(prev))
		}
		fmt.Fprintf(b, "%.1f,%.1f ", x(p.T), y(v))
		prev = v
	}
	b.WriteString("\"/>\n")
}

// tickStep is a round time step giving at most about ten ticks over maxT.
func tickStep(maxT float64) float64 {
	for _, s := range []float64{1, 2, 5, 10, 20, 30, 60, 120, 300} {
		if maxT/s <= 10 {
			return s
		}
	}
	return 600
}
