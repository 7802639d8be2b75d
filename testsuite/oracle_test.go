package testsuite_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// ok is an admitted entry that arrived and completed at the given offsets.
func ok(arrival, done time.Duration, charged, settled, remaining testsuite.Charges) testsuite.Entry {
	return testsuite.Entry{Arrival: at(arrival), Done: at(done), Status: 200, Admitted: true,
		Charged: charged, Settled: settled, Remaining: remaining}
}

// refused is a 429 (or other refusal) charged one request.
func refused(arrival time.Duration, c testsuite.Cause, status int, remaining testsuite.Charges) testsuite.Entry {
	var charged testsuite.Charges
	charged[testsuite.Requests] = 1
	return testsuite.Entry{Arrival: at(arrival), Done: at(arrival), Status: status, Cause: c,
		Charged: charged, Remaining: remaining}
}

func ch(pairs ...any) testsuite.Charges {
	var c testsuite.Charges
	for i := 0; i < len(pairs); i += 2 {
		c[pairs[i].(testsuite.Dimension)] = int64(pairs[i+1].(int))
	}
	return c
}

const (
	rq  = testsuite.Requests
	tok = testsuite.Tokens
	in  = testsuite.InputTokens
	out = testsuite.OutputTokens
	rpd = testsuite.RequestsPerDay
)

func TestAnalyze(t *testing.T) {
	// 60 admitted at t0 (remaining 59..0), one at +1s (remaining 0), one
	// refused at +2s.
	var rpmBurst []testsuite.Entry
	for i := range 60 {
		rpmBurst = append(rpmBurst, ok(0, 0, ch(rq, 1), ch(), ch(rq, 59-i)))
	}
	rpmBurst = append(rpmBurst,
		ok(time.Second, time.Second, ch(rq, 1), ch(), ch(rq, 0)),
		refused(2*time.Second, testsuite.CauseRequests, 429, ch(rq, 0)))

	tests := []struct {
		name    string
		limits  testsuite.Limits
		entries []testsuite.Entry
		want    testsuite.Report
	}{
		{
			name:    "requests burst then refusal",
			limits:  testsuite.Limits{RequestsPerMinute: 60},
			entries: rpmBurst,
			want: testsuite.Report{
				Entries:     62,
				ByStatus:    map[int]int{200: 61, 429: 1},
				ByCause:     map[testsuite.Cause]int{testsuite.CauseRequests: 1},
				RateLimited: map[testsuite.Cause]int{testsuite.CauseRequests: 1},
				Dimensions: []testsuite.DimensionReport{
					// The refused request counts toward the peak: 62 > 60.
					{Dimension: rq, Limit: 60, Period: time.Minute, Burst: 60, Bound: 120, Peak: 62, PeakStart: t0, Charged: 62, Saturated: 3},
				},
				Saturated: true, Binding: rq, SaturatedFrom: t0, SaturatedTo: at(2 * time.Second),
				// 61 admitted ÷ (1/s × 2s + 60).
				BindingCharged: 61, Utilization: 61.0 / 62,
			},
		},
		{
			name:   "openai tokens bind over a sliding window",
			limits: testsuite.Limits{RequestsPerMinute: 100, TokensPerMinute: 1000},
			entries: []testsuite.Entry{
				ok(0, time.Second, ch(rq, 1, tok, 600), ch(), ch(rq, 99, tok, 400)),
				ok(30*time.Second, 31*time.Second, ch(rq, 1, tok, 600), ch(), ch(rq, 99, tok, 300)),
				refused(40*time.Second, testsuite.CauseTokens, 429, ch(rq, 98, tok, 466)),
				ok(61*time.Second, 62*time.Second, ch(rq, 1, tok, 600), ch(), ch(rq, 99, tok, 216)),
			},
			want: testsuite.Report{
				Entries:     4,
				ByStatus:    map[int]int{200: 3, 429: 1},
				ByCause:     map[testsuite.Cause]int{testsuite.CauseTokens: 1},
				RateLimited: map[testsuite.Cause]int{testsuite.CauseTokens: 1},
				Dimensions: []testsuite.DimensionReport{
					{Dimension: rq, Limit: 100, Period: time.Minute, Burst: 100, Bound: 200, Peak: 3, PeakStart: t0, Charged: 4},
					// [t0, t0+60s) holds 2×600; +61s falls outside it.
					{Dimension: tok, Limit: 1000, Period: time.Minute, Burst: 1000, Bound: 2000, Peak: 1200, PeakStart: t0, Charged: 1800, Saturated: 4},
				},
				Saturated: true, Binding: tok, SaturatedFrom: t0, SaturatedTo: at(61 * time.Second),
				// 1800 ÷ (1000/min × 61s + 1000).
				BindingCharged: 1800, Utilization: 1800 / (1000.0*61/60 + 1000),
			},
		},
		{
			name:   "anthropic output settles at completion",
			limits: testsuite.Limits{InputTokensPerMinute: 1000, OutputTokensPerMinute: 100},
			entries: []testsuite.Entry{
				ok(0, 10*time.Second, ch(rq, 1, in, 100), ch(out, 80), ch(in, 900, out, 100)),
				ok(15*time.Second, 25*time.Second, ch(rq, 1, in, 100), ch(out, 80), ch(in, 900, out, 28)),
				refused(30*time.Second, testsuite.CauseOutputTokens, 429, ch(in, 1000)),
			},
			want: testsuite.Report{
				Entries:     3,
				ByStatus:    map[int]int{200: 2, 429: 1},
				ByCause:     map[testsuite.Cause]int{testsuite.CauseOutputTokens: 1},
				RateLimited: map[testsuite.Cause]int{testsuite.CauseOutputTokens: 1},
				Dimensions: []testsuite.DimensionReport{
					{Dimension: in, Limit: 1000, Period: time.Minute, Burst: 1000, Bound: 2000, Peak: 200, PeakStart: t0, Charged: 200},
					{Dimension: out, Limit: 100, Period: time.Minute, Burst: 100, Bound: 200, Peak: 160, PeakStart: at(10 * time.Second), Charged: 160, Saturated: 2},
				},
				Saturated: true, Binding: out, SaturatedFrom: at(15 * time.Second), SaturatedTo: at(30 * time.Second),
				// Only e2's output (done at +25s) is inside [+15s, +30s]: 80 ÷ (100/min × 15s + 100).
				BindingCharged: 80, Utilization: 80.0 / 125,
			},
		},
		{
			name:   "per-second burst and a daily quota",
			limits: testsuite.Limits{RequestsPerMinute: 120, BurstWindow: testsuite.PerSecond, RequestsPerDay: 3},
			entries: []testsuite.Entry{
				ok(0, 0, ch(rq, 1, rpd, 1), ch(), ch(rq, 1, rpd, 2)),
				ok(0, 0, ch(rq, 1, rpd, 1), ch(), ch(rq, 0, rpd, 1)),
				refused(time.Second, testsuite.CauseDailyQuota, 429, ch(rq, 0, rpd, 1)),
				ok(13*time.Hour, 13*time.Hour, ch(rq, 1, rpd, 1), ch(), ch(rq, 1, rpd, 2)),
			},
			want: testsuite.Report{
				Entries:     4,
				ByStatus:    map[int]int{200: 3, 429: 1},
				ByCause:     map[testsuite.Cause]int{testsuite.CauseDailyQuota: 1},
				RateLimited: map[testsuite.Cause]int{testsuite.CauseDailyQuota: 1},
				Dimensions: []testsuite.DimensionReport{
					{Dimension: rq, Limit: 120, Period: time.Minute, Burst: 2, Bound: 122, Peak: 3, PeakStart: t0, Charged: 4, Saturated: 1},
					// The day resets at midnight UTC (t0+12h): a sliding day holds 3.
					{Dimension: rpd, Limit: 3, Period: 24 * time.Hour, Burst: 3, Bound: 6, Peak: 3, PeakStart: t0, Charged: 3},
				},
				Saturated: true, Binding: rq, SaturatedFrom: t0, SaturatedTo: t0,
				// A single saturated instant: 2 ÷ the burst of 2.
				BindingCharged: 2, Utilization: 1,
			},
		},
		{
			name:   "never saturated",
			limits: testsuite.Limits{RequestsPerMinute: 10},
			entries: []testsuite.Entry{
				ok(0, 0, ch(rq, 1), ch(), ch(rq, 9)),
				ok(time.Second, time.Second, ch(rq, 1), ch(), ch(rq, 8)),
			},
			want: testsuite.Report{
				Entries:     2,
				ByStatus:    map[int]int{200: 2},
				ByCause:     map[testsuite.Cause]int{},
				RateLimited: map[testsuite.Cause]int{},
				Dimensions: []testsuite.DimensionReport{
					{Dimension: rq, Limit: 10, Period: time.Minute, Burst: 10, Bound: 20, Peak: 2, PeakStart: t0, Charged: 2},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testsuite.Analyze(tt.entries, tt.limits)
			require.InDelta(t, tt.want.Utilization, got.Utilization, 1e-12)
			got.Utilization = tt.want.Utilization
			require.Equal(t, tt.want, got)
		})
	}
}

// TestReportAgainstLiveProvider checks the oracle end to end against the
// provider's own buckets (RPM 60, a 10-request burst).
func TestReportAgainstLiveProvider(t *testing.T) {
	limits := testsuite.Limits{RequestsPerMinute: 60, BurstWindow: 10 * time.Second}
	s := scopeOf(gpt)
	spend := func(t *testing.T, fp *testsuite.FakeProvider) {
		_, err := fp.Spend(s, testsuite.Demand{InputTokens: 10, MaxTokens: 10})
		require.NoError(t, err)
	}

	t.Run("paced client uses the whole budget", func(t *testing.T) {
		fp, clock := start(t, limits, testsuite.Limits{})
		for range 10 {
			spend(t, fp) // the burst
		}
		for range 50 {
			clock.Advance(time.Second)
			spend(t, fp) // then exactly the rate
		}
		r := fp.Report(s)
		d, _ := r.For(rq)
		require.Empty(t, r.RateLimited)
		require.Equal(t, int64(60), d.Peak)
		require.LessOrEqual(t, float64(d.Peak), d.Bound)
		require.Equal(t, rq, r.Binding)
		require.Equal(t, 50*time.Second, r.SaturatedTo.Sub(r.SaturatedFrom))
		require.InDelta(t, 1.0, r.Utilization, 1e-9) // 60 ÷ (1/s × 50s + 10)
	})

	t.Run("client hammering at twice the rate starves itself", func(t *testing.T) {
		fp, clock := start(t, limits, testsuite.Limits{})
		for range 120 {
			spend(t, fp)
			clock.Advance(500 * time.Millisecond)
		}
		r := fp.Report(s)
		d, _ := r.For(rq)
		require.Equal(t, int64(120), d.Peak) // refused requests are charged too
		require.Greater(t, float64(d.Peak), d.Bound)
		require.GreaterOrEqual(t, r.RateLimited[testsuite.CauseRequests], 100)
		require.Less(t, r.Utilization, 0.1)
		require.Contains(t, r.String(), "binding requests")
	})
}
