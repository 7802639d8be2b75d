package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/capacity"
)

// Chart geometry, in pixels.
const (
	plotWidth   = 960
	plotPanel   = 190 // height of one panel's plot area
	plotLeft    = 80
	plotRight   = 20
	plotTop     = 40 // above each panel: its title and legend
	plotBottom  = 28 // below each panel: the time axis
	plotColumns = plotWidth - plotLeft - plotRight
)

// plotColors are the series' colors, in order.
var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"}

// plotLine is one series of a panel.
type plotLine struct {
	name  string
	value func(p simPoint) float64
	limit float64 // drawn dashed; 0: none
}

// plotPanelDef is one panel: a title and its lines.
type plotPanelDef struct {
	title string
	lines []plotLine
}

// writePlot writes the chart of r to path: an SVG, or for a path ending in
// .html an HTML page with the chart and summary (the text report).
func writePlot(path string, r simReport, summary string) error {
	var b bytes.Buffer
	if strings.EqualFold(filepath.Ext(path), ".html") || strings.EqualFold(filepath.Ext(path), ".htm") {
		writePlotHTML(&b, r, summary)
	} else {
		writeSVG(&b, r)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the plot: %w", err)
	}
	return nil
}

// writePlotHTML writes a self-contained HTML page: a title, the summary and
// the chart.
func writePlotHTML(w io.Writer, r simReport, summary string) {
	fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tollgate simulate: %s</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
</style>
</head>
<body>
<h1>tollgate simulate: %d calls, %s accounting</h1>
<pre>%s</pre>
`, html.EscapeString(r.Provider), r.Total.Calls, html.EscapeString(r.Provider), html.EscapeString(summary))
	writeSVG(w, r)
	fmt.Fprint(w, "\n</body>\n</html>\n")
}

// plotPanels returns the panels of r: the provider's remaining tokens (its
// limited per-minute token dimensions), its remaining requests, and the
// calls waiting and in flight.
func plotPanels(r simReport) []plotPanelDef {
	var tokens, requests plotPanelDef
	tokens.title = "provider remaining tokens"
	requests.title = "provider remaining requests"
	for i, d := range r.Series.Dims {
		line := plotLine{name: d.String(), limit: r.Series.Limit[i], value: func(p simPoint) float64 { return math.Max(p.Remaining[i], 0) }}
		switch {
		case d == capacity.Requests:
			requests.lines = append(requests.lines, line)
		case d.PerMinute():
			tokens.lines = append(tokens.lines, line)
		}
	}
	var panels []plotPanelDef
	for _, p := range []plotPanelDef{tokens, requests} {
		if len(p.lines) > 0 {
			panels = append(panels, p)
		}
	}
	return append(panels, plotPanelDef{title: "calls", lines: []plotLine{
		{name: "waiting", value: func(p simPoint) float64 { return float64(p.Waiting) }},
		{name: "in flight", value: func(p simPoint) float64 { return float64(p.InFlight) }},
	}})
}

// writeSVG writes the chart of r as a standalone SVG document: one panel
// per plotPanels, time on the x axis.
func writeSVG(w io.Writer, r simReport) {
	panels := plotPanels(r)
	height := len(panels) * (plotTop + plotPanel + plotBottom)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	fmt.Fprintf(w, "<title>tollgate simulate: the provider's remaining over time</title>\n")
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotWidth, height)
	var span time.Duration
	if n := len(r.Series.Points); n > 0 {
		span = r.Series.Points[n-1].T
	}
	span = max(span, time.Second)
	for i, p := range panels {
		writePanel(w, r.Series.Points, p, i*(plotTop+plotPanel+plotBottom), span)
	}
	fmt.Fprint(w, "</svg>\n")
}

// writePanel draws panel p at vertical offset y0.
func writePanel(w io.Writer, points []simPoint, p plotPanelDef, y0 int, span time.Duration) {
	top := y0 + plotTop
	bottom := top + plotPanel
	fmt.Fprintf(w, `<g class="panel"><text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, y0+18, html.EscapeString(p.title))
	// The y scale: 0 to the largest value or limit.
	top0 := 1.0
	for _, l := range p.lines {
		top0 = math.Max(top0, l.limit)
		for _, pt := range points {
			top0 = math.Max(top0, l.value(pt))
		}
	}
	yOf := func(v float64) float64 { return float64(bottom) - v/top0*float64(plotPanel) }
	xOf := func(t time.Duration) float64 { return plotLeft + float64(t)/float64(span)*plotColumns }
	// Axes, grid and labels.
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", plotLeft, top, plotColumns, plotPanel)
	for i := 0; i <= 4; i++ {
		v := top0 * float64(i) / 4
		y := yOf(v)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n",
			plotLeft, y, plotLeft+plotColumns, y, plotLeft-6, y+4, compact(v))
	}
	for i := 0; i <= 6; i++ {
		t := span * time.Duration(i) / 6
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", xOf(t), bottom+18, clockLabel(t))
	}
	// Lines, limits and the legend.
	lx := plotLeft + 260
	for i, l := range p.lines {
		color := plotColors[i%len(plotColors)]
		if l.limit > 0 {
			fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="6 4" stroke-opacity="0.6"><title>%s limit %s</title></line>`+"\n",
				plotLeft, yOf(l.limit), plotLeft+plotColumns, yOf(l.limit), color, html.EscapeString(l.name), compact(l.limit))
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"><title>%s</title></polyline>`+"\n",
			color, polyPoints(points, l.value, xOf, yOf, span), html.EscapeString(l.name))
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, y0+14, color, lx+16, y0+18, html.EscapeString(l.name))
		lx += 30 + 8*len(l.name)
	}
	fmt.Fprint(w, "</g>\n")
}

// polyPoints returns the "x,y x,y" points of value over points, at most two
// per pixel column: the least and the most the column saw, in the order
// they came.
func polyPoints(points []simPoint, value func(simPoint) float64, xOf func(time.Duration) float64, yOf func(float64) float64, span time.Duration) string {
	var b strings.Builder
	emit := func(t time.Duration, v float64) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", xOf(t), yOf(v))
	}
	col := -1
	var lo, hi simPoint
	flush := func() {
		if col < 0 {
			return
		}
		a, z := lo, hi
		if z.T < a.T {
			a, z = z, a
		}
		emit(a.T, value(a))
		if z.T != a.T || value(z) != value(a) {
			emit(z.T, value(z))
		}
	}
	for _, p := range points {
		c := int(float64(p.T) / float64(span) * plotColumns)
		if c != col {
			flush()
			col, lo, hi = c, p, p
			continue
		}
		if value(p) < value(lo) {
			lo = p
		}
		if value(p) > value(hi) {
			hi = p
		}
	}
	flush()
	return b.String()
}

// compact formats v for an axis: 1.5M, 30k, 12.
func compact(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.2f", v/1e6), ".00") + "M"
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// clockLabel formats a time offset for the x axis: 1m30s, 2h5m.
func clockLabel(t time.Duration) string {
	switch {
	case t >= time.Hour:
		return t.Round(time.Minute).String()
	case t >= time.Minute:
		return t.Round(time.Second).String()
	}
	return t.Round(100 * time.Millisecond).String()
}
