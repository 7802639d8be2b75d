package interceptor

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
	"github.com/tollgate-dev/tollgate/capacity/headers"
)

func TestOptionsWithoutLimitsAreValid(t *testing.T) {
	o, err := Options{Store: capacity.NewMemoryStore(capacity.MemoryOptions{})}.withDefaults()
	require.NoError(t, err)
	l, follows, err := o.scopeLimits(capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "a"}, accounting.OpenAIProfile{}, time.Now())
	require.NoError(t, err)
	assert.True(t, follows)
	assert.Equal(t, int64(1), l.MaxInFlight, "one call at a time until the first answer")
}

// TestReportedLimits: a scope with no configured rate runs one call at a
// time until a report of its limits, then on them (the store applies
// them) while the last report is fresh; Gemini, which reports none, needs
// configured limits.
func TestReportedLimits(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	openai := capacity.Scope{Provider: capacity.OpenAI, LimitGroup: "gpt-4o", Credential: "a"}
	report := headers.Parse(capacity.OpenAI, http.Header{
		"X-Ratelimit-Limit-Requests": {"500"}, "X-Ratelimit-Limit-Tokens": {"30000"},
		"X-Ratelimit-Remaining-Requests": {"499"}, "X-Ratelimit-Remaining-Tokens": {"29000"},
	}, t0)
	var r reportedLimits

	tests := []struct {
		name       string
		configured capacity.Limits
		at         time.Time
		inFlight   int64
	}{
		{"configured rates are used as they are", capacity.Limits{RequestsPerMinute: 60}, t0, 0},
		{"no rate, no report: one in flight", capacity.Limits{}, t0, 1},
		{"a lower configured MaxInFlight stays", capacity.Limits{MaxInFlight: 1, Burst: time.Second}, t0, 1},
	}
	for _, tt := range tests {
		l, err := r.limits(openai, tt.configured, tt.at)
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.inFlight, l.MaxInFlight, tt.name)
		assert.Equal(t, tt.configured.Burst, l.Burst, "%s: other fields kept", tt.name)
	}

	rep, changed, ok := r.observed(openai, report, t0)
	require.True(t, ok)
	assert.True(t, changed, "the first report is news")
	assert.Equal(t, "requests 500/min, tokens 30000/min", rep.String())
	_, changed, _ = r.observed(openai, report, t0.Add(time.Second))
	assert.False(t, changed, "the same limits again")

	l, err := r.limits(openai, capacity.Limits{MaxInFlight: 8}, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, int64(8), l.MaxInFlight, "after a report: the configured limits, the store applying the reported")
	l, err = r.limits(openai, capacity.Limits{}, t0.Add(time.Second+followedReportAge+time.Second))
	require.NoError(t, err)
	assert.Equal(t, int64(1), l.MaxInFlight, "a stale report no longer counts: the store forgets it")

	_, _, ok = r.observed(openai, capacity.Observation{}, t0)
	assert.False(t, ok, "no limit reported")

	gemini := capacity.Scope{Provider: capacity.Gemini, LimitGroup: "gemini-2.5-flash", Credential: "a"}
	_, err = r.limits(gemini, capacity.Limits{}, t0)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "Options.Limits"), err.Error())
	_, err = r.limits(gemini, capacity.Limits{RequestsPerMinute: 10}, t0)
	assert.NoError(t, err, "configured Gemini limits are used")
}
