package errors

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

func nextRetryDelay(t *testing.T, c Converter, v Verdict) time.Duration {
	t.Helper()
	appErr, ok := c.ActivityError(v, "").(*temporal.ApplicationError)
	require.True(t, ok)
	return appErr.NextRetryDelay()
}

func TestConverterRetryDelay(t *testing.T) {
	fixed := func(j time.Duration) func(time.Duration) time.Duration {
		return func(time.Duration) time.Duration { return j }
	}
	tests := []struct {
		name    string
		conv    Converter
		verdict Verdict
		want    time.Duration
	}{
		{"no jitter: exactly the wait", Converter{Jitter: fixed(0)}, Verdict{Class: RateLimited, RetryAfter: 2 * time.Second}, 2 * time.Second},
		{"jitter below zero is clamped", Converter{Jitter: fixed(-time.Hour)}, Verdict{Class: RateLimited, RetryAfter: 2 * time.Second}, 2 * time.Second},
		{"jitter past the window is clamped", Converter{Jitter: fixed(time.Hour)}, Verdict{Class: RateLimited, RetryAfter: 2 * time.Second},
			4*time.Second - 1},
		{"jitter window is at most a refill period", Converter{Jitter: fixed(time.Hour)}, Verdict{Class: RateLimited, RetryAfter: 100 * time.Second},
			160*time.Second - 1},
		{"no wait: within one refill period", Converter{Jitter: fixed(time.Hour), RefillPeriod: 10 * time.Second}, Verdict{Class: RateLimited},
			10*time.Second - 1},
		{"no wait: never zero", Converter{Jitter: fixed(0)}, Verdict{Class: RateLimited}, time.Second},
		{"huge wait does not overflow", Converter{Jitter: fixed(time.Hour)}, Verdict{Class: RateLimited, RetryAfter: math.MaxInt64 - 5},
			math.MaxInt64 - 5},
		{"transient without wait: policy backoff", Converter{Jitter: fixed(time.Hour)}, Verdict{Class: Transient}, 0},
		{"transient with wait", Converter{Jitter: fixed(0)}, Verdict{Class: Transient, RetryAfter: time.Second}, time.Second},
		{"terminal: no delay", Converter{Jitter: fixed(time.Hour)}, Verdict{Class: QuotaExhausted, RetryAfter: time.Hour}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, nextRetryDelay(t, tt.conv, tt.verdict))
		})
	}
}

func TestConverterDefaultJitterBounds(t *testing.T) {
	var c Converter
	for range 1000 {
		d := nextRetryDelay(t, c, Verdict{Class: RateLimited, RetryAfter: 2 * time.Second})
		require.GreaterOrEqual(t, d, 2*time.Second)
		require.Less(t, d, 4*time.Second)
		d = nextRetryDelay(t, c, Verdict{Class: RateLimited})
		require.GreaterOrEqual(t, d, time.Second)
		require.Less(t, d, DefaultRefillPeriod)
	}
}

func TestActivityErrorTypes(t *testing.T) {
	for c := range Class(numClasses) {
		err := ActivityError(Verdict{Class: c}, "")
		if c == Canceled {
			_, isApp := err.(*temporal.ApplicationError)
			require.False(t, isApp, "cancellation is the context's error")
			continue
		}
		appErr, ok := err.(*temporal.ApplicationError)
		require.True(t, ok)
		require.Equal(t, "tollgate."+c.String(), appErr.Type())
		require.Equal(t, TypeOf(c), appErr.Type())
		got, ok := ClassOf(err)
		require.True(t, ok)
		require.Equal(t, c, got)
	}
	require.False(t, IsRateLimited(nil))
	require.False(t, IsRateLimited(temporal.NewApplicationError("x", "other.RateLimited")))
	_, ok := DetailsOf(temporal.NewApplicationError("x", TypeCapacityWait))
	require.False(t, ok)
	require.True(t, IsCapacityWait(temporal.NewApplicationError("x", TypeCapacityWait)))
	require.True(t, IsDeadlineUnmeetable(temporal.NewNonRetryableApplicationError("x", TypeDeadlineUnmeetable, nil)))
}
