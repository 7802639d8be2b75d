package figures

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// at returns t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// ok is an admitted request at second s charged requests and tokens, done
// 100 ms later.
func ok(s float64, tokens int64) testsuite.Entry {
	var c testsuite.Charges
	c[testsuite.Requests], c[testsuite.Tokens] = 1, tokens
	return testsuite.Entry{Arrival: at(s), Done: at(s + 0.1), Status: 200, Admitted: true, Charged: c}
}

// refused is a 429 at second s, charged its request.
func refused(s float64) testsuite.Entry {
	var c testsuite.Charges
	c[testsuite.Requests] = 1
	return testsuite.Entry{Arrival: at(s), Done: at(s), Status: 429, Cause: testsuite.CauseTokens, Charged: c}
}

// openAI limits: 1 request and 100 tokens a second, 5 s buckets (5 and 500).
var openAI = testsuite.Limits{RequestsPerMinute: 60, TokensPerMinute: 6000, BurstWindow: 5 * time.Second}

func TestMeasure(t *testing.T) {
	direct := ok(0.5, 5000)
	direct.Direct = true
	anthropic := testsuite.Limits{RequestsPerMinute: 600, InputTokensPerMinute: 6000, OutputTokensPerMinute: 1200, BurstWindow: time.Minute}
	withOutput := func(s float64, in, out int64) testsuite.Entry {
		e := ok(s, 0)
		e.Charged[testsuite.InputTokens], e.Settled[testsuite.OutputTokens] = in, out
		return e
	}
	cases := []struct {
		name        string
		entries     []testsuite.Entry
		limits      testsuite.Limits
		end         time.Time
		binding     testsuite.Dimension
		charged     int64
		minimum     time.Duration
		drain       time.Duration
		utilization float64
		ratio       float64
		requests    int
		rateLimited int
	}{
		{
			name:    "tokens bind: (1200 − 500) / 100 per second",
			entries: []testsuite.Entry{ok(0, 300), ok(1, 300), ok(2, 300), ok(3, 300)},
			limits:  openAI, end: at(10),
			binding: testsuite.Tokens, charged: 1200, minimum: 7 * time.Second, drain: 10 * time.Second,
			utilization: 1200.0 / (500 + 100*10), ratio: 10.0 / 7, requests: 4,
		},
		{
			name:    "refused and Direct requests charge nothing; a 429 is counted",
			entries: []testsuite.Entry{ok(0, 300), refused(0.2), direct, ok(1, 300), ok(2, 300), ok(3, 300)},
			limits:  openAI, end: at(7),
			binding: testsuite.Tokens, charged: 1200, minimum: 7 * time.Second, drain: 7 * time.Second,
			utilization: 1200.0 / (500 + 100*7), ratio: 1, requests: 5, rateLimited: 1,
		},
		{
			name:    "requests after the end are not charged",
			entries: []testsuite.Entry{ok(0, 900), ok(1, 900), ok(12, 900)},
			limits:  openAI, end: at(11),
			binding: testsuite.Tokens, charged: 1800, minimum: 13 * time.Second, drain: 11 * time.Second,
			utilization: 1800.0 / (500 + 100*11), ratio: 11.0 / 13, requests: 3,
		},
		{
			name:    "requests bind when each is small",
			entries: []testsuite.Entry{ok(0, 1), ok(0, 1), ok(0, 1), ok(0, 1), ok(0, 1), ok(1, 1), ok(2, 1), ok(3, 1)},
			limits:  openAI, end: at(4),
			binding: testsuite.Requests, charged: 8, minimum: 3 * time.Second, drain: 4 * time.Second,
			utilization: 8.0 / (5 + 4), ratio: 4.0 / 3, requests: 8,
		},
		{
			name:    "Anthropic output, settled at Done, binds a full-minute bucket",
			entries: []testsuite.Entry{withOutput(0, 100, 1000), withOutput(1, 100, 1000), withOutput(2, 100, 1000)},
			limits:  anthropic, end: at(95),
			binding: testsuite.OutputTokens, charged: 3000, minimum: 90 * time.Second, drain: 95 * time.Second,
			utilization: 3000.0 / (1200 + 20*95), ratio: 95.0 / 90, requests: 3,
		},
		{
			name:    "nothing over the buckets: minimum 0, ratio 0",
			entries: []testsuite.Entry{ok(0, 100)},
			limits:  openAI, end: at(1),
			binding: testsuite.Requests, charged: 1, drain: time.Second,
			utilization: 1.0 / (5 + 1), requests: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Measure(c.entries, c.limits, c.end)
			assert.Equal(t, c.requests, f.Requests)
			assert.Equal(t, c.rateLimited, f.RateLimited)
			assert.Equal(t, t0, f.First)
			assert.Equal(t, c.drain, f.Drain)
			assert.Equal(t, c.binding, f.Binding.Dimension)
			assert.Equal(t, c.charged, f.Binding.Charged)
			assert.Equal(t, c.minimum, f.Binding.Minimum)
			assert.InDelta(t, c.utilization, f.Utilization, 1e-9)
			assert.InDelta(t, c.ratio, f.DrainRatio, 1e-9)
		})
	}
}

// TestTail: the excess of a record whose bucket never fills up after the
// first request is what the last batch call left in the bucket, plus its
// answer, less what arrived meanwhile.
func TestTail(t *testing.T) {
	batch := func(s float64, tokens, remaining int64, done float64) testsuite.Entry {
		e := ok(s, tokens)
		e.Tag, e.Remaining[testsuite.Tokens], e.Done = BatchTag, remaining, at(done)
		return e
	}
	// 100 tokens a second into 500: the bucket is empty after 0 and 3, and
	// holds 200 at 5, of which the last batch call takes 150.
	entries := []testsuite.Entry{
		batch(0, 500, 0, 0.1),
		batch(3, 300, 0, 3.1),
		batch(5, 150, 50, 5.2),
		ok(5.1, 30),            // an interactive call during its answer
		batch(5.2, 10, 0, 6.0), // answered after the end: not the last
	}
	end := at(5.25)
	f := Measure(entries, openAI, end)
	require.Equal(t, testsuite.Tokens, f.Binding.Dimension)
	assert.Equal(t, 4900*time.Millisecond, f.Binding.Minimum, "(500 + 300 + 150 + 30 + 10 − 500) / 100")
	assert.Equal(t, Tail{Left: 500 * time.Millisecond, Answer: 250 * time.Millisecond, Filled: 400 * time.Millisecond}, f.Tail)
	assert.Equal(t, f.Drain-f.Binding.Minimum, f.Tail.Left+f.Tail.Answer-f.Tail.Filled)

	for i := range entries {
		entries[i].Tag = ""
	}
	assert.Zero(t, Measure(entries, openAI, end).Tail, "no batch call tagged")
}

func TestMeasureEmpty(t *testing.T) {
	f := Measure(nil, openAI, t0)
	assert.Zero(t, f.Requests)
	assert.Zero(t, f.DrainRatio)
}

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	cases := []struct {
		name string
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 0.99, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p99 of 10 is the largest", ms(5, 1, 9, 3, 2, 8, 4, 6, 10, 7), 0.99, 10 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(40, 10, 30, 20), 0.5, 20 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, Percentile(c.ds, c.p))
		})
	}
}

func TestSeries(t *testing.T) {
	a, b := ok(0, 300), ok(0.05, 300)
	a.Remaining[testsuite.Tokens], b.Remaining[testsuite.Tokens] = 200, 0
	entries := []testsuite.Entry{b, a, refused(0.07)}

	level := Level(entries, testsuite.Tokens, 500, t0)
	require.Len(t, level, 3)
	assert.Equal(t, Point{T: 0, V: 0.4}, level[0])
	assert.InDelta(t, 0.05, level[1].T, 1e-9)
	assert.Zero(t, level[1].V)

	inFlight := InFlight(entries, t0)
	var vs []float64
	for _, p := range inFlight {
		vs = append(vs, p.V)
	}
	assert.Equal(t, []float64{1, 2, 1, 0}, vs, "a at 0, b at 0.05, a done at 0.1, b at 0.15")

	assert.Equal(t, []float64{0.07}, RateLimited(entries, t0))
}
