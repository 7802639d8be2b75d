package headers

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/internal/testenv"
)

// fixtureTime is the date header of every fixture.
var fixtureTime = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

type headerFixture struct {
	Name     string                     `json:"name"`
	Provider capacity.Provider          `json:"provider"`
	Status   int                        `json:"status"`
	Headers  map[string]string          `json:"headers"`
	Body     string                     `json:"body"`
	Expect   map[string]json.RawMessage `json:"expect"`
	Source   string                     `json:"source"`
}

type expectedDimension struct {
	Limit     *int64   `json:"limit"`
	Remaining *int64   `json:"remaining"`
	ResetInS  *float64 `json:"reset_in_s"`
	// InFlightExcluded: the remaining does not count calls in flight.
	InFlightExcluded bool `json:"in_flight_excluded"`
}

func loadHeaderFixtures(tb testing.TB) []headerFixture {
	tb.Helper()
	var cases []headerFixture
	testenv.LoadFixtures(tb, "rate-limit-headers.json", &cases, false)
	require.NotEmpty(tb, cases)
	return cases
}

// toHeader builds the header net/http would hand over (canonical keys).
func toHeader(m map[string]string) http.Header { return testenv.Header(m) }

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

func TestParseHeadersFixtures(t *testing.T) {
	for _, fc := range loadHeaderFixtures(t) {
		t.Run(fc.Name, func(t *testing.T) {
			obs := Parse(fc.Provider, toHeader(fc.Headers), fixtureTime)
			require.Equal(t, fc.Provider, obs.Provider)
			require.True(t, obs.Date.Equal(fixtureTime), "date %v", obs.Date)

			want := [capacity.NumDimensions]capacity.DimensionObservation{}
			dims := 0
			for key, raw := range fc.Expect {
				if key == "note" {
					continue
				}
				dim, err := capacity.ParseDimension(key)
				require.NoError(t, err)
				var e expectedDimension
				require.NoError(t, json.Unmarshal(raw, &e))
				w := &want[dim]
				if e.Limit != nil {
					w.HasLimit, w.Limit = true, *e.Limit
				}
				if e.Remaining != nil {
					w.HasRemaining, w.Remaining = true, *e.Remaining
				}
				if e.ResetInS != nil {
					w.HasReset, w.ResetIn = true, seconds(*e.ResetInS)
				}
				w.InFlightExcluded = e.InFlightExcluded
				dims++
			}
			require.Equal(t, want, obs.Dims)
			if dims == 0 {
				require.True(t, obs.Empty(), "observation %+v", obs)
			}
		})
	}
}

func TestParseHeaders(t *testing.T) {
	t0 := fixtureTime
	date := t0.Format(http.TimeFormat)
	tests := []struct {
		name     string
		provider capacity.Provider
		header   http.Header
		now      time.Time
		want     capacity.Observation
	}{
		{
			name:     "lower-case keys built by hand",
			provider: capacity.OpenAI,
			header: http.Header{
				"x-ratelimit-limit-requests":     {"60"},
				"x-ratelimit-remaining-requests": {"0"},
				"x-ratelimit-reset-requests":     {"1s"},
			},
			now: t0,
			want: capacity.Observation{Provider: capacity.OpenAI, Dims: dims(capacity.Requests, capacity.DimensionObservation{
				HasLimit: true, Limit: 60, HasRemaining: true, Remaining: 0, HasReset: true, ResetIn: time.Second,
			})},
		},
		{
			name:     "anthropic reset relative to date header, not to a skewed now",
			provider: capacity.Anthropic,
			header: toHeader(map[string]string{
				"date":                                 date,
				"anthropic-ratelimit-tokens-remaining": "10",
				"anthropic-ratelimit-tokens-reset":     t0.Add(30 * time.Second).Format(time.RFC3339),
			}),
			now: t0.Add(5 * time.Minute),
			want: capacity.Observation{Provider: capacity.Anthropic, Date: t0, Dims: dims(capacity.Tokens, capacity.DimensionObservation{
				HasRemaining: true, Remaining: 10, HasReset: true, ResetIn: 30 * time.Second,
				InFlightExcluded: true, // capacity.Anthropic's combined tokens count output as it is produced
			})},
		},
		{
			name:     "anthropic reset relative to now without date header",
			provider: capacity.Anthropic,
			header: toHeader(map[string]string{
				"anthropic-ratelimit-requests-reset": t0.Add(1500 * time.Millisecond).Format(time.RFC3339Nano),
			}),
			now: t0,
			want: capacity.Observation{Provider: capacity.Anthropic, Dims: dims(capacity.Requests, capacity.DimensionObservation{
				HasReset: true, ResetIn: 1500 * time.Millisecond,
			})},
		},
		{
			name:     "anthropic reset in the past is absent",
			provider: capacity.Anthropic,
			header: toHeader(map[string]string{
				"date":                               date,
				"anthropic-ratelimit-requests-reset": t0.Add(-time.Second).Format(time.RFC3339),
			}),
			now:  t0,
			want: capacity.Observation{Provider: capacity.Anthropic, Date: t0},
		},
		{
			name:     "openai zero reset and zero limit are absent",
			provider: capacity.OpenAI,
			header: toHeader(map[string]string{
				"x-ratelimit-limit-tokens": "0",
				"x-ratelimit-reset-tokens": "0s",
			}),
			now:  t0,
			want: capacity.Observation{Provider: capacity.OpenAI},
		},
		{
			name:     "openai headers ignored for anthropic",
			provider: capacity.Anthropic,
			header:   toHeader(map[string]string{"x-ratelimit-remaining-tokens": "5"}),
			now:      t0,
			want:     capacity.Observation{Provider: capacity.Anthropic},
		},
		{
			name:     "gemini: retry-after only",
			provider: capacity.Gemini,
			header: toHeader(map[string]string{
				"x-ratelimit-remaining-tokens": "5",
				"retry-after":                  "7",
			}),
			now:  t0,
			want: capacity.Observation{Provider: capacity.Gemini, RetryAfter: 7 * time.Second},
		},
		{
			name:     "unknown provider reads both families",
			provider: capacity.Provider("groq"),
			header: toHeader(map[string]string{
				"x-ratelimit-remaining-requests":          "3",
				"anthropic-ratelimit-output-tokens-limit": "80000",
			}),
			now: t0,
			want: func() capacity.Observation {
				o := capacity.Observation{Provider: "groq"}
				o.Dims[capacity.Requests] = capacity.DimensionObservation{HasRemaining: true, Remaining: 3}
				o.Dims[capacity.OutputTokens] = capacity.DimensionObservation{HasLimit: true, Limit: 80000}
				return o
			}(),
		},
		{
			name:     "garbage never panics",
			provider: capacity.OpenAI,
			header: toHeader(map[string]string{
				"date":                           "yesterday",
				"x-ratelimit-limit-requests":     "1e3",
				"x-ratelimit-remaining-requests": "+5",
				"x-ratelimit-reset-requests":     "-1s",
				"x-ratelimit-limit-tokens":       "99999999999999999999",
				"x-ratelimit-reset-tokens":       "9999999999h",
				"retry-after":                    "NaN",
				"retry-after-ms":                 "Inf",
			}),
			now:  t0,
			want: capacity.Observation{Provider: capacity.OpenAI},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Parse(tt.provider, tt.header, tt.now))
		})
	}
}

func dims(d capacity.Dimension, o capacity.DimensionObservation) [capacity.NumDimensions]capacity.DimensionObservation {
	var a [capacity.NumDimensions]capacity.DimensionObservation
	a[d] = o
	return a
}

func TestParseRetryAfter(t *testing.T) {
	t0 := fixtureTime
	tests := []struct {
		name   string
		header map[string]string
		now    time.Time
		want   time.Duration
		wantOK bool
	}{
		{"seconds", map[string]string{"retry-after": "21"}, t0, 21 * time.Second, true},
		{"fractional seconds", map[string]string{"retry-after": "1.5"}, t0, 1500 * time.Millisecond, true},
		{"milliseconds win", map[string]string{"retry-after": "2", "retry-after-ms": "850"}, t0, 850 * time.Millisecond, true},
		{"fractional milliseconds", map[string]string{"retry-after-ms": "0.5"}, t0, 500 * time.Microsecond, true},
		{"zero ms falls back to seconds", map[string]string{"retry-after": "3", "retry-after-ms": "0"}, t0, 3 * time.Second, true},
		{"bad ms falls back to seconds", map[string]string{"retry-after": "3", "retry-after-ms": "soon"}, t0, 3 * time.Second, true},
		{"zero is absent", map[string]string{"retry-after": "0"}, t0, 0, false},
		{"negative is absent", map[string]string{"retry-after": "-4"}, t0, 0, false},
		{"word is absent", map[string]string{"retry-after": "tomorrow"}, t0, 0, false},
		{"exponent is absent", map[string]string{"retry-after": "1e3"}, t0, 0, false},
		{"overflow is absent", map[string]string{"retry-after": "99999999999999999999"}, t0, 0, false},
		{
			"http-date relative to date header",
			map[string]string{"date": t0.Format(http.TimeFormat), "retry-after": t0.Add(90 * time.Second).Format(http.TimeFormat)},
			t0.Add(time.Hour), 90 * time.Second, true,
		},
		{
			"http-date relative to now",
			map[string]string{"retry-after": t0.Add(90 * time.Second).Format(http.TimeFormat)},
			t0, 90 * time.Second, true,
		},
		{
			"http-date in the past is absent",
			map[string]string{"retry-after": t0.Add(-time.Second).Format(http.TimeFormat)},
			t0, 0, false,
		},
		{"none", nil, t0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := RetryAfter(toHeader(tt.header), tt.now)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"12ms", 12 * time.Millisecond, true},
		{"57.5s", 57500 * time.Millisecond, true},
		{"6m0s", 6 * time.Minute, true},
		{"23h47m36.648s", 23*time.Hour + 47*time.Minute + 36648*time.Millisecond, true},
		{"1s", time.Second, true},
		{"1.209s", 1209 * time.Millisecond, true},
		{"2d3h", 51 * time.Hour, true},
		{"120ms", 120 * time.Millisecond, true},
		{"5µs", 5 * time.Microsecond, true},
		{".5s", 500 * time.Millisecond, true},
		{"0s", 0, true},
		{"", 0, false},
		{"0", 0, false},
		{"-1s", 0, false},
		{"+1s", 0, false},
		{"1", 0, false},
		{"1x", 0, false},
		{".s", 0, false},
		{"soon", 0, false},
		{"9999999999999h", 0, false},
		{"106752d", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseDuration(tt.in)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseHeadersDoesNotAllocate(t *testing.T) {
	for _, fc := range loadHeaderFixtures(t) {
		h := toHeader(fc.Headers)
		allocs := testing.AllocsPerRun(100, func() {
			_ = Parse(fc.Provider, h, fixtureTime)
		})
		if fc.Name == "malformed-headers" {
			continue // rejected values may allocate their parse errors
		}
		require.Zero(t, allocs, fc.Name)
	}
}

func BenchmarkParseHeaders(b *testing.B) {
	for _, fc := range loadHeaderFixtures(b) {
		h := toHeader(fc.Headers)
		b.Run(fc.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Parse(fc.Provider, h, fixtureTime)
			}
		})
	}
}
