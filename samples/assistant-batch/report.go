package assistantbatch

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
)

// sampleEvery is how often RunDemo samples the shared budget for its report.
const sampleEvery = 250 * time.Millisecond

// demoScope is the quota scope every call of the sample is gated on.
var demoScope = capacity.Scope{Provider: capacity.OpenAI, LimitGroup: Model, Credential: Credential}

// Timeline is what RunDemo recorded for its HTML report: the shared budget
// every sampleEvery, and when each call was scheduled and admitted.
type Timeline struct {
	// Start is when the batch was started; the report counts time from it.
	Start time.Time
	// Dimensions are the scope's limited dimensions other than InFlight:
	// the levels the report draws.
	Dimensions []capacity.Dimension
	Samples    []Sample
	// Calls are the admitted calls, in order of admission.
	Calls []CallTimes
}

// Sample is the scope's budget at one instant, read with Store.Snapshot.
type Sample struct {
	At time.Time
	// Level is, per dimension of Timeline.Dimensions, the level as a
	// fraction of the bucket (per-minute) or daily allowance (per-day); it
	// is negative while the scope is in debt.
	Level [capacity.NumDimensions]float64
	// InFlight is the calls holding a lease.
	InFlight int
}

// CallTimes is one model call: its class, when its activity was first
// scheduled, and when the gate first admitted it. Admitted − Scheduled is
// the call's queue age at admission (the tollgate.queue.age metric).
type CallTimes struct {
	Class     capacity.Class
	Scheduled time.Time
	Admitted  time.Time
}

// ClassQueue is one class's queue at each sample of a Timeline.
type ClassQueue struct {
	Class capacity.Class
	// Waiting is the calls scheduled and not yet admitted; Oldest the age
	// of the longest waiting of them (0 when none waits).
	Waiting []int
	Oldest  []time.Duration
}

// Queues returns the queue of every class that has calls, in class order,
// at the instant of each sample: a call waits from its Scheduled time until
// its Admitted time.
func (tl Timeline) Queues() []ClassQueue {
	var classes []capacity.Class
	for _, c := range tl.Calls {
		if !slices.Contains(classes, c.Class) {
			classes = append(classes, c.Class)
		}
	}
	slices.Sort(classes)
	out := make([]ClassQueue, len(classes))
	for i, class := range classes {
		q := ClassQueue{Class: class, Waiting: make([]int, len(tl.Samples)), Oldest: make([]time.Duration, len(tl.Samples))}
		for j, s := range tl.Samples {
			for _, c := range tl.Calls {
				if c.Class != class || c.Scheduled.After(s.At) || !c.Admitted.After(s.At) {
					continue
				}
				q.Waiting[j]++
				q.Oldest[j] = max(q.Oldest[j], s.At.Sub(c.Scheduled))
			}
		}
		out[i] = q
	}
	return out
}

// recorder collects a Timeline while the demo runs. Its methods are safe
// for concurrent use.
type recorder struct {
	store capacity.Store
	scope capacity.Scope

	mu       sync.Mutex
	dims     []capacity.Dimension
	samples  []Sample
	calls    []CallTimes
	admitted map[string]bool // calls recorded, by workflow run and activity id
}

func newRecorder(store capacity.Store, scope capacity.Scope) *recorder {
	return &recorder{store: store, scope: scope, admitted: map[string]bool{}}
}

// sample reads the scope's budget once. A scope the store does not hold
// yet (no call reached the gate) and a failed read add no sample.
func (r *recorder) sample(ctx context.Context) {
	snap, err := r.store.Snapshot(ctx, r.scope)
	if err != nil {
		return
	}
	var dims []capacity.Dimension
	for d := range capacity.Dimension(capacity.NumDimensions) {
		if b := snap.Budget[d]; b.Limited && b.Capacity > 0 && d != capacity.InFlight {
			dims = append(dims, d)
		}
	}
	if len(dims) == 0 {
		return
	}
	s := Sample{At: snap.Now, InFlight: len(snap.Leases)}
	for _, d := range dims {
		s.Level[d] = snap.Level[d] / snap.Budget[d].Capacity
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dims = dims
	r.samples = append(r.samples, s)
}

// chat wraps the Chat activity to record each call's admission: the gate
// runs the activity only once it admitted the call, so the first run of a
// call is its admission.
func (r *recorder) chat(next func(context.Context, activities.OpenAIChatRequest) (activities.Result, error)) func(context.Context, activities.OpenAIChatRequest) (activities.Result, error) {
	return func(ctx context.Context, req activities.OpenAIChatRequest) (activities.Result, error) {
		info := activity.GetInfo(ctx)
		id := info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
		r.mu.Lock()
		if !r.admitted[id] {
			r.admitted[id] = true
			r.calls = append(r.calls, CallTimes{Class: req.Class, Scheduled: info.ScheduledTime, Admitted: time.Now()})
		}
		r.mu.Unlock()
		return next(ctx, req)
	}
}

// timeline returns what was recorded, counting from start.
func (r *recorder) timeline(start time.Time) Timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Timeline{Start: start, Dimensions: slices.Clone(r.dims), Samples: slices.Clone(r.samples), Calls: slices.Clone(r.calls)}
}

// Chart geometry, in SVG pixels.
const (
	chartWidth, chartHeight = 760, 200
	plotLeft, plotRight     = 60, 640
	plotTop, plotBottom     = 16, 170
)

// Series colors: dimensions, in flight, classes.
var (
	dimensionColors = map[capacity.Dimension]string{
		capacity.Requests: "#2ca02c", capacity.InputTokens: "#17becf", capacity.OutputTokens: "#bcbd22",
		capacity.Tokens: "#9467bd", capacity.RequestsPerDay: "#8c564b", capacity.TokensPerDay: "#e377c2",
	}
	inFlightColor = "#ff7f0e"
	classColors   = []string{"#1f77b4", "#d62728", "#7f7f7f", "#17becf", "#8c564b"}
)

// point is one value of a series at t seconds from the start.
type point struct{ t, v float64 }

// series is one line of a chart.
type series struct {
	name, color string
	points      []point
}

// chart is one panel: its series on [0, maxT] × [yMin, yMax].
type chart struct {
	title      string
	yMin, yMax float64
	series     []series
}

// charts returns the report's panels: budget levels, in flight, and per
// class the age of the oldest waiting call and the calls waiting.
func (tl Timeline) charts() []chart {
	level := chart{title: "Budget left in each limited dimension, a fraction of its bucket (negative: booked ahead or in debt)", yMax: 1}
	for _, d := range tl.Dimensions {
		s := series{name: d.String(), color: dimensionColors[d]}
		for _, p := range tl.Samples {
			s.points = append(s.points, point{tl.seconds(p.At), p.Level[d]})
			level.yMin = math.Min(level.yMin, p.Level[d])
		}
		level.series = append(level.series, s)
	}
	inFlight := chart{title: "Calls in flight (holding a lease)", yMax: 1}
	s := series{name: "in flight", color: inFlightColor}
	for _, p := range tl.Samples {
		s.points = append(s.points, point{tl.seconds(p.At), float64(p.InFlight)})
	}
	inFlight.series = append(inFlight.series, s)
	age := chart{title: "Queue age: the oldest waiting call of each class, seconds", yMax: 1}
	waiting := chart{title: "Calls waiting for admission, per class", yMax: 1}
	for i, q := range tl.Queues() {
		color := classColors[i%len(classColors)]
		a, w := series{name: q.Class.String(), color: color}, series{name: q.Class.String(), color: color}
		for j, p := range tl.Samples {
			a.points = append(a.points, point{tl.seconds(p.At), q.Oldest[j].Seconds()})
			w.points = append(w.points, point{tl.seconds(p.At), float64(q.Waiting[j])})
		}
		age.series = append(age.series, a)
		waiting.series = append(waiting.series, w)
	}
	out := []chart{level, inFlight, age, waiting}
	for i := range out {
		for _, s := range out[i].series {
			for _, p := range s.points {
				out[i].yMax = math.Max(out[i].yMax, p.v)
			}
		}
	}
	return out
}

func (tl Timeline) seconds(t time.Time) float64 { return t.Sub(tl.Start).Seconds() }

// renderCheck is the page's only script: it runs after the charts were
// laid out and records in #render-check how many charts and lines the
// browser drew (a line counts when it has points and extent), so a test
// can tell from the DOM that the charts rendered.
const renderCheck = `<script>
(function () {
  var charts = document.querySelectorAll("svg.chart"), lines = 0, drawn = 0, points = 0;
  charts.forEach(function (svg) {
    svg.querySelectorAll("polyline.series").forEach(function (p) {
      lines++;
      points += p.points.numberOfItems;
      if (p.getTotalLength() > 0 && p.getBBox().width > 0) drawn++;
    });
  });
  var m = document.getElementById("render-check");
  m.dataset.charts = charts.length;
  m.dataset.lines = lines;
  m.dataset.drawn = drawn;
  m.dataset.points = points;
  m.textContent = "drawn: " + charts.length + " charts, " + drawn + " of " + lines + " lines, " + points + " points";
})();
</script>
`

// WriteHTML writes the report as a self-contained HTML page: the budget
// levels, the calls in flight and, per class, the queue age and the calls
// waiting over time, then the table Print writes. The charts are inline SVG
// and the page loads nothing.
func (r DemoReport) WriteHTML(w io.Writer, o DemoOptions) error {
	var table bytes.Buffer
	r.Print(&table, o)
	tl := r.Timeline
	maxT := 1.0
	if n := len(tl.Samples); n > 0 {
		maxT = math.Max(maxT, tl.seconds(tl.Samples[n-1].At))
	}
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>tollgate demo report</title>
<style>body{font-family:sans-serif;margin:2em}h2{margin:1.6em 0 .3em;font-size:15px}
svg text{font-size:11px;font-family:sans-serif}pre{background:#f6f6f6;padding:1em}#render-check{color:#999;font-size:11px}</style></head><body>
<h1>tollgate demo: a nightly batch and an interactive assistant on one quota</h1>
`)
	fmt.Fprintf(&b, "<p>%d documents, %d questions (one every %v), scope %s. Sampled every %v from the store; time in seconds from the batch's start.</p>\n",
		o.Docs, o.Questions, o.Every, html.EscapeString(demoScope.Key()), sampleEvery)
	for _, c := range tl.charts() {
		writeChart(&b, c, maxT)
	}
	fmt.Fprintf(&b, "<h2>Report</h2>\n<pre>%s</pre>\n<p id=\"render-check\"></p>\n%s</body></html>\n",
		html.EscapeString(strings.TrimSpace(table.String())), renderCheck)
	_, err := io.WriteString(w, b.String())
	return err
}

// SaveHTML writes the report (WriteHTML) to the file path and returns its
// absolute path.
func (r DemoReport) SaveHTML(path string, o DemoOptions) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b, o); err != nil {
		return "", err
	}
	return abs, os.WriteFile(abs, b.Bytes(), 0o644)
}

// writeChart draws c with time on [0, maxT], its legend on the right.
func writeChart(b *strings.Builder, c chart, maxT float64) {
	x := func(t float64) float64 { return plotLeft + (plotRight-plotLeft)*t/maxT }
	y := func(v float64) float64 { return plotBottom - (plotBottom-plotTop)*(v-c.yMin)/(c.yMax-c.yMin) }
	fmt.Fprintf(b, "<h2>%s</h2>\n<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
		html.EscapeString(c.title), chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#ccc\"/>\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	if c.yMin < 0 {
		fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\" stroke-dasharray=\"4 3\"/>\n", plotLeft, plotRight, y(0), y(0))
	}
	step := tickStep(maxT)
	for t := 0.0; t <= maxT; t += step {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x(t), plotBottom+14, t)
	}
	for _, v := range slices.Compact([]float64{c.yMin, 0, c.yMax}) {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", plotLeft-4, y(v)+4, v)
	}
	for i, s := range c.series {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" fill=\"%s\">%s</text>\n", plotRight+10, plotTop+10+16*i, s.color, html.EscapeString(s.name))
		fmt.Fprintf(b, "<polyline class=\"series\" data-name=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
			html.EscapeString(s.name), s.color)
		for _, p := range s.points {
			fmt.Fprintf(b, "%.1f,%.1f ", x(p.t), y(p.v))
		}
		b.WriteString("\"/>\n")
	}
	b.WriteString("</svg>\n")
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
