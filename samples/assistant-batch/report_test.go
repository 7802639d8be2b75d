package assistantbatch_test

import (
	"bytes"
	"fmt"
	"html/template"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	ab "github.com/tollgate-dev/tollgate/samples/assistant-batch"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// at is t0 + ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// samplesAt returns empty samples at the instants ms.
func samplesAt(ms ...int) []ab.Sample {
	out := make([]ab.Sample, len(ms))
	for i, m := range ms {
		out[i].At = at(m)
	}
	return out
}

func TestTimelineQueues(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		calls   []ab.CallTimes
		samples []ab.Sample
		want    []ab.ClassQueue
	}{
		{
			name:    "no calls, no queues",
			samples: samplesAt(0, 250),
			want:    []ab.ClassQueue{},
		},
		{
			name:    "a call waits from its scheduling until its admission",
			calls:   []ab.CallTimes{{Class: capacity.Bulk, Scheduled: at(100), Admitted: at(600)}},
			samples: samplesAt(0, 100, 350, 600),
			want:    []ab.ClassQueue{{Class: capacity.Bulk, Waiting: []int{0, 1, 1, 0}, Oldest: []time.Duration{0, 0, 250 * ms, 0}}},
		},
		{
			name: "the oldest waiting call gives the age",
			calls: []ab.CallTimes{
				{Class: capacity.Bulk, Scheduled: at(0), Admitted: at(300)},
				{Class: capacity.Bulk, Scheduled: at(200), Admitted: at(500)},
			},
			samples: samplesAt(250, 400),
			want:    []ab.ClassQueue{{Class: capacity.Bulk, Waiting: []int{2, 1}, Oldest: []time.Duration{250 * ms, 200 * ms}}},
		},
		{
			name: "each class its own queue, in class order",
			calls: []ab.CallTimes{
				{Class: capacity.Bulk, Scheduled: at(0), Admitted: at(1000)},
				{Class: capacity.Interactive, Scheduled: at(400), Admitted: at(450)},
			},
			samples: samplesAt(0, 420, 500),
			want: []ab.ClassQueue{
				{Class: capacity.Interactive, Waiting: []int{0, 1, 0}, Oldest: []time.Duration{0, 20 * ms, 0}},
				{Class: capacity.Bulk, Waiting: []int{1, 1, 1}, Oldest: []time.Duration{0, 420 * ms, 500 * ms}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := ab.Timeline{Start: t0, Samples: tt.samples, Calls: tt.calls}
			assert.Equal(t, tt.want, tl.Queues())
		})
	}
}

// syntheticReport is a report of a 10 s run sampled every 250 ms: 80 bulk
// calls scheduled at once and admitted one every 125 ms, an interactive
// call every 500 ms admitted after 40 ms.
func syntheticReport() (ab.DemoReport, ab.DemoOptions) {
	tl := ab.Timeline{Start: t0, Dimensions: []capacity.Dimension{capacity.Requests, capacity.Tokens}}
	for i := range 40 {
		s := ab.Sample{At: at(250 * i), InFlight: 10 + i%7}
		s.Level[capacity.Requests] = 1 - float64(i%10)/20
		s.Level[capacity.Tokens] = float64(i)/20 - 1
		tl.Samples = append(tl.Samples, s)
	}
	for i := range 80 {
		tl.Calls = append(tl.Calls, ab.CallTimes{Class: capacity.Bulk, Scheduled: t0, Admitted: at(125 * i)})
	}
	for i := range 20 {
		tl.Calls = append(tl.Calls, ab.CallTimes{Class: capacity.Interactive, Scheduled: at(500 * i), Admitted: at(500*i + 40)})
	}
	r := ab.DemoReport{Batch: ab.BatchResult{Classified: 80}, BatchTime: 10 * time.Second, Answered: 20,
		LatencyP50: 300 * time.Millisecond, LatencyP95: 400 * time.Millisecond, LatencyMax: 450 * time.Millisecond,
		ProviderRequests: 100, Timeline: tl}
	return r, ab.DemoOptions{Docs: 80, Questions: 20, Every: 500 * time.Millisecond}
}

// The page loads nothing and holds the table Print writes.
func TestReportHTMLIsSelfContained(t *testing.T) {
	r, o := syntheticReport()
	var page, table bytes.Buffer
	require.NoError(t, r.WriteHTML(&page, o))
	r.Print(&table, o)
	html := page.String()
	for _, s := range []string{"http:", "https:", "src=", "href=", "url(", "@import", "<link", "<iframe", "<img"} {
		assert.NotContains(t, html, s)
	}
	assert.Contains(t, html, template.HTMLEscapeString(strings.TrimSpace(table.String())))
	assert.Equal(t, 4, strings.Count(html, `<svg class="chart"`), "charts")
	assert.Equal(t, 7, strings.Count(html, `<polyline class="series"`), "lines: 2 dimensions, in flight, 2 classes × (age, waiting)")
}

// renderCheck is what the report's script recorded in #render-check.
type renderCheck struct {
	Charts, Lines, Drawn, Points int
}

var (
	renderCheckTag = regexp.MustCompile(`<p id="render-check"[^>]*>`)
	dataAttr       = regexp.MustCompile(`data-(\w+)="(\d+)"`)
	seriesStroke   = regexp.MustCompile(`<polyline class="series"[^>]*stroke="#([0-9a-f]{6})"`)
)

// openReport opens the report at path in headless Chromium and returns
// what its script recorded once the charts were laid out, and the DOM.
func openReport(t *testing.T, path string) (renderCheck, string) {
	t.Helper()
	dom := string(testenv.Headless(t, path, "--dump-dom"))
	tag := renderCheckTag.FindString(dom)
	require.NotEmpty(t, tag, "no #render-check in the DOM Chromium dumped")
	got := map[string]int{}
	for _, m := range dataAttr.FindAllStringSubmatch(tag, -1) {
		got[m[1]], _ = strconv.Atoi(m[2])
	}
	require.Len(t, got, 4, "the page's script did not run: %s", tag)
	return renderCheck{Charts: got["charts"], Lines: got["lines"], Drawn: got["drawn"], Points: got["points"]}, dom
}

// The report opened in headless Chromium: the script finds every line laid
// out with all its points, and a screenshot shows every line's color.
func TestReportRendersInChromium(t *testing.T) {
	testenv.Chromium(t)
	r, o := syntheticReport()
	dir := t.TempDir()
	path, err := r.SaveHTML(filepath.Join(dir, "report.html"), o)
	require.NoError(t, err)

	check, dom := openReport(t, path)
	assert.Equal(t, renderCheck{Charts: 4, Lines: 7, Drawn: 7, Points: 7 * 40}, check)

	shot := filepath.Join(dir, "report.png")
	testenv.Headless(t, path, "--window-size=820,1400", "--screenshot="+shot)
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	colors := map[string]int{}
	for _, m := range seriesStroke.FindAllStringSubmatch(dom, -1) {
		colors[m[1]] = 0
	}
	require.Len(t, colors, 5, "line colors: 2 dimensions, in flight, 2 classes")
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := fmt.Sprintf("%02x%02x%02x", r>>8, g>>8, bl>>8)
			if n, ok := colors[c]; ok {
				colors[c] = n + 1
			}
		}
	}
	for c, n := range colors {
		assert.Greaterf(t, n, 50, "pixels of #%s in the screenshot", c)
	}
	t.Logf("%+v; pixels per line color: %v", check, colors)
}
