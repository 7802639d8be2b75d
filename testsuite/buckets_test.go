package testsuite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var b0 = time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC)

func TestBucket(t *testing.T) {
	tests := []struct {
		name          string
		limit         int64
		window        time.Duration
		steps         func(b *bucket)
		wantLevel     float64
		wantRemaining int64
		wantWait1     time.Duration
		wantUntilFull time.Duration
	}{
		{name: "full at start", limit: 60, window: PerMinute, steps: func(*bucket) {},
			wantLevel: 60, wantRemaining: 60},
		{name: "per-second capacity", limit: 600, window: PerSecond, steps: func(*bucket) {},
			wantLevel: 10, wantRemaining: 10},
		{name: "capacity at least one", limit: 30, window: PerSecond, steps: func(*bucket) {},
			wantLevel: 1, wantRemaining: 1},
		{name: "drained then refilled exactly", limit: 60, window: PerMinute, steps: func(b *bucket) {
			b.take(60)
			b.refill(b0.Add(3 * time.Second))
		}, wantLevel: 3, wantRemaining: 3, wantUntilFull: 57 * time.Second},
		{name: "refill stops at capacity", limit: 60, window: PerMinute, steps: func(b *bucket) {
			b.take(10)
			b.refill(b0.Add(time.Hour))
		}, wantLevel: 60, wantRemaining: 60},
		{name: "clock going back earns nothing", limit: 60, window: PerMinute, steps: func(b *bucket) {
			b.take(60)
			b.refill(b0.Add(-time.Hour))
		}, wantLevel: 0, wantRemaining: 0, wantWait1: time.Second, wantUntilFull: time.Minute},
		{name: "refused debt is bounded by capacity", limit: 6, window: PerMinute, steps: func(b *bucket) {
			for range 20 {
				b.takeRefused(1)
			}
		}, wantLevel: -6, wantRemaining: 0, wantWait1: 70 * time.Second, wantUntilFull: 2 * time.Minute},
		{name: "output debt is not bounded", limit: 60, window: PerMinute, steps: func(b *bucket) {
			b.take(200)
		}, wantLevel: -140, wantRemaining: 0, wantWait1: 141 * time.Second, wantUntilFull: 200 * time.Second},
		{name: "lowered limit keeps what was used", limit: 100, window: PerMinute, steps: func(b *bucket) {
			b.take(30)
			b.configure(50, PerMinute, b0)
		}, wantLevel: 20, wantRemaining: 20, wantUntilFull: 36 * time.Second},
		{name: "raised limit keeps what was used", limit: 100, window: PerMinute, steps: func(b *bucket) {
			b.take(30)
			b.configure(200, PerMinute, b0)
		}, wantLevel: 170, wantRemaining: 170, wantUntilFull: 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bucket
			b.configure(tt.limit, tt.window, b0)
			tt.steps(&b)
			require.InDelta(t, tt.wantLevel, b.level, 1e-9)
			require.Equal(t, tt.wantRemaining, b.remaining())
			require.Equal(t, tt.wantWait1, b.wait(1))
			require.Equal(t, tt.wantUntilFull, b.untilFull())
		})
	}
}

func TestBucketOversizeChargeWaitsForFullBucket(t *testing.T) {
	var b bucket
	b.configure(600, PerSecond, b0) // capacity 10
	require.True(t, b.fits(25), "a charge larger than the bucket fits a full bucket")
	b.take(25)
	require.Equal(t, 2500*time.Millisecond, b.wait(25)) // from -15 back to full: 25 tokens at 10/s
	require.False(t, b.fits(25))
	b.refill(b0.Add(2500 * time.Millisecond))
	require.True(t, b.fits(25))
}

func TestUnlimitedBucket(t *testing.T) {
	var b bucket
	b.configure(0, PerMinute, b0)
	b.take(1e9)
	require.True(t, b.fits(1e12))
	require.Equal(t, time.Duration(0), b.wait(5))
	require.False(t, b.enabled())
}

func TestDayCounterResetsAtMidnightUTC(t *testing.T) {
	var c dayCounter
	c.roll(b0)
	c.requests = 5
	c.roll(b0.Add(11 * time.Hour))
	require.Equal(t, int64(5), c.requests)
	require.Equal(t, time.Date(2026, 10, 16, 0, 0, 0, 0, time.UTC), c.resetAt())
	c.roll(b0.Add(12 * time.Hour))
	require.Equal(t, int64(0), c.requests)
}

func TestFormats(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 12 * time.Millisecond: "12ms", 1500 * time.Millisecond: "1.5s",
		6 * time.Minute: "6m0s", 1208100 * time.Microsecond: "1.209s", 1: "1ms",
	} {
		require.Equal(t, want, openaiDuration(d))
	}
	require.Equal(t, "2026-10-15T12:00:00.015Z", anthropicTime(b0, 14100*time.Microsecond))
	require.Equal(t, "2026-10-15T12:00:01Z", anthropicTime(b0, time.Second))
	require.Equal(t, "2026-10-15T12:00:00Z", anthropicTime(b0, -time.Second))
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 400000: "400,000", 1234567: "1,234,567", -5000: "-5,000"} {
		require.Equal(t, want, commas(n))
	}
	require.Equal(t, "1", retryAfterSeconds(time.Millisecond))
	require.Equal(t, "13", retryAfterSeconds(12480*time.Millisecond))
	require.Equal(t, `{"m":"a > b & c"}`, string(marshal(map[string]string{"m": "a > b & c"})))
}

func TestCountTokens(t *testing.T) {
	for s, want := range map[string]int64{"": 0, "a": 1, "abcd": 1, "abcde": 2, "hello world!": 3} {
		require.Equal(t, want, CountTokens(s), s)
	}
	require.Equal(t, int64(0), PromptTokens())
	require.Equal(t, int64(7+5), PromptTokens("hello world!", "hi"))
	for _, n := range []int64{1, 2, 7, 4096, 5000} {
		require.Equal(t, n, CountTokens(answer(n)))
	}
}

func TestSeededOutputIsDeterministicAndBounded(t *testing.T) {
	f := SeededOutput(7)
	seen := map[int64]bool{}
	for h := range uint64(1000) {
		c := Call{MaxTokens: 50, Hash: h}
		n := f(c)
		require.Equal(t, n, f(c))
		require.GreaterOrEqual(t, n, int64(1))
		require.LessOrEqual(t, n, int64(50))
		seen[n] = true
	}
	require.Greater(t, len(seen), 40)
	require.NotEqual(t, SeededOutput(1)(Call{MaxTokens: 1 << 40, Hash: 3}), SeededOutput(2)(Call{MaxTokens: 1 << 40, Hash: 3}))
}
