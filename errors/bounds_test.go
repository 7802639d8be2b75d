package errors

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// hundredYears is issue 13's retry-after: 3153600000 seconds.
const hundredYears = "3153600000"

func TestHugeRetryAfterIsBounded(t *testing.T) {
	t0 := fixtureTime
	date := t0.Format(http.TimeFormat)
	tests := []struct {
		name     string
		provider capacity.Provider
		status   int
		header   map[string]string
		body     string
		want     want
	}{
		{
			name: "per-minute tokens: exhausted for a day at most", provider: capacity.OpenAI, status: 429,
			header: map[string]string{"date": date, "retry-after": hundredYears},
			body:   openAIBody("tokens", "rate_limit_exceeded", "Rate limit reached on tokens per min (TPM)."),
			want:   want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: "tokens", retryAfter: MaxDailyReset, resetAt: t0.Add(MaxDailyReset)},
		},
		{
			name: "per-minute as an HTTP-date a century out: a day", provider: capacity.OpenAI, status: 429,
			header: map[string]string{"date": date, "retry-after": t0.AddDate(100, 0, 0).Format(http.TimeFormat)},
			body:   openAIBody("requests", "rate_limit_exceeded", "Rate limit reached on requests per min (RPM)."),
			want:   want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: "requests", retryAfter: MaxDailyReset, resetAt: t0.Add(MaxDailyReset)},
		},
		{
			name: "anthropic input tokens per minute: a day", provider: capacity.Anthropic, status: 429,
			header: map[string]string{"date": date, "retry-after": hundredYears},
			body:   `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 400,000 input tokens per minute."}}`,
			want:   want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: "input_tokens", retryAfter: MaxDailyReset, resetAt: t0.Add(MaxDailyReset)},
		},
		{
			name: "gemini per-minute quota: a day", provider: capacity.Gemini, status: 429,
			header: map[string]string{"date": date},
			body:   geminiQuotaBody("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", hundredYears+"s"),
			want: want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: "requests",
				quota: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", retryAfter: MaxDailyReset, resetAt: t0.Add(MaxDailyReset)},
		},
		{
			name: "openai daily limit: a day", provider: capacity.OpenAI, status: 429,
			header: map[string]string{"date": date, "retry-after": hundredYears},
			body:   openAIBody("requests", "rate_limit_exceeded", "Rate limit reached on requests per day (RPD)."),
			want: want{class: QuotaExhausted, reason: ReasonDailyQuota, dim: "requests_per_day",
				retryAfter: MaxDailyReset, resetAt: t0.Add(MaxDailyReset)},
		},
		{
			name: "gemini daily quota: a day", provider: capacity.Gemini, status: 429,
			header: map[string]string{"date": date},
			body:   geminiQuotaBody("GenerateRequestsPerDayPerProjectPerModel-FreeTier", hundredYears+"s"),
			want: want{class: QuotaExhausted, reason: ReasonDailyQuota, dim: "requests_per_day",
				quota: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", retryAfter: MaxDailyReset, resetAt: t0.Add(MaxDailyReset)},
		},
		{
			name: "no known budget: an hour", provider: capacity.OpenAI, status: 429,
			header: map[string]string{"date": date, "retry-after": hundredYears},
			body:   openAIBody("", "rate_limit_exceeded", "Rate limit reached."),
			want: want{class: QuotaExhausted, reason: ReasonWaitExceedsBound,
				retryAfter: MaxUnknownWait, resetAt: t0.Add(MaxUnknownWait)},
		},
		{
			name: "overloaded: an hour", provider: capacity.OpenAI, status: 503,
			header: map[string]string{"date": date, "retry-after": hundredYears},
			body:   openAIBody("server_error", "", "The server is overloaded, please try again later."),
			want:   want{class: Overloaded, retryAfter: MaxUnknownWait},
		},
		{
			name: "usage limit stated a century out: 31 days", provider: capacity.Anthropic, status: 400,
			header: map[string]string{"date": date},
			body:   `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2126-11-01 at 00:00 UTC."}}`,
			want:   want{class: QuotaExhausted, reason: ReasonUsageLimit, resetAt: t0.Add(MaxStatedReset)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ClassifyHTTP(tt.provider, tt.status, fixtureHeader(tt.header), []byte(tt.body), t0)
			tt.want.check(t, v)
		})
	}
}

func TestHugeRetryAfterIsBoundedWhateverMaxRateLimitWait(t *testing.T) {
	c := Classifier{MaxRateLimitWait: 200 * 365 * 24 * time.Hour}
	h := fixtureHeader(map[string]string{"retry-after": hundredYears})
	v := c.ClassifyHTTP(capacity.OpenAI, 429, h, []byte(openAIBody("", "rate_limit_exceeded", "Rate limit reached.")), fixtureTime)
	want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, retryAfter: MaxUnknownWait,
		resetAt: fixtureTime.Add(MaxUnknownWait)}.check(t, v)
}

func TestImplausibleDateHeaderUsesLocalClock(t *testing.T) {
	now := fixtureTime
	resetIn20s := func(date time.Time) map[string]string {
		return map[string]string{
			"date":                                   date.Format(http.TimeFormat),
			"anthropic-ratelimit-requests-limit":     "50",
			"anthropic-ratelimit-requests-remaining": "0",
			"anthropic-ratelimit-requests-reset":     now.Add(20 * time.Second).Format(time.RFC3339),
		}
	}
	rpm := `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50 requests per minute."}}`
	usage := `{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2026-11-01 at 00:00 UTC."}}`
	regain := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		want   want
	}{
		{"reset, date ten years slow", 429, resetIn20s(now.AddDate(-10, 0, 0)), rpm,
			want{class: RateLimited, dim: "requests", retryAfter: 20 * time.Second}},
		{"reset, date ten years fast", 429, resetIn20s(now.AddDate(10, 0, 0)), rpm,
			want{class: RateLimited, dim: "requests", retryAfter: 20 * time.Second}},
		{"reset, date just past the skew", 429, resetIn20s(now.Add(MaxDateSkew + time.Minute)), rpm,
			want{class: RateLimited, dim: "requests", retryAfter: 20 * time.Second}},
		{"reset, date a little slow is trusted", 429, resetIn20s(now.Add(-10 * time.Second)), rpm,
			want{class: RateLimited, dim: "requests", retryAfter: 30 * time.Second}},
		{"usage limit, date ten years slow", 400, map[string]string{"date": now.AddDate(-10, 0, 0).Format(http.TimeFormat)}, usage,
			want{class: QuotaExhausted, reason: ReasonUsageLimit, resetAt: regain}},
		{"usage limit, date a few minutes slow is trusted", 400, map[string]string{"date": now.Add(-5 * time.Minute).Format(http.TimeFormat)}, usage,
			want{class: QuotaExhausted, reason: ReasonUsageLimit, resetAt: regain.Add(5 * time.Minute)}},
		{"retry-after HTTP-date, date in 1990", 429,
			map[string]string{"date": "Mon, 15 Oct 1990 12:00:00 GMT", "retry-after": now.Add(30 * time.Second).Format(http.TimeFormat)},
			openAIBody("requests", "rate_limit_exceeded", "Rate limit reached on requests per min (RPM)."),
			want{class: RateLimited, dim: "requests", retryAfter: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := capacity.Anthropic
			if tt.header["retry-after"] != "" {
				p = capacity.OpenAI
			}
			v := ClassifyHTTP(p, tt.status, fixtureHeader(tt.header), []byte(tt.body), now)
			tt.want.check(t, v)
			date, _ := http.ParseTime(tt.header["date"])
			if date.Sub(now).Abs() > MaxDateSkew {
				require.True(t, v.Observation.Date.IsZero(), "an implausible date header is left out")
			} else {
				require.Equal(t, date, v.Observation.Date)
			}
		})
	}
}

// TestWaitLongerThanItsKindIsExhaustion: a rate limit stating a wait its
// kind of budget cannot mean is a spent quota, blocked until the stated
// time (cut to the longest reset of its kind); a wait within its kind
// stays a rate-limit delay.
func TestWaitLongerThanItsKindIsExhaustion(t *testing.T) {
	t0 := fixtureTime
	date := t0.Format(http.TimeFormat)
	rpm := openAIBody("requests", "rate_limit_exceeded", "Rate limit reached on requests per min (RPM).")
	azure := `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 86400 seconds."}}`
	exhausted := func(dim string, wait time.Duration) want {
		return want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: dim, retryAfter: wait, resetAt: t0.Add(wait)}
	}
	tests := []struct {
		name     string
		provider capacity.Provider
		header   map[string]string
		body     string
		want     want
	}{
		{"azure per-minute tokens, a day in retry-after", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "86400"}, azure, exhausted("tokens", 24*time.Hour)},
		{"azure per-minute tokens, a day in the message only", capacity.OpenAI,
			map[string]string{"date": date}, azure, exhausted("tokens", 24*time.Hour)},
		{"a day as an HTTP date", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": t0.Add(24 * time.Hour).Format(http.TimeFormat)}, rpm, exhausted("requests", 24*time.Hour)},
		{"a day as a Unix time", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": fmt.Sprint(t0.Add(24 * time.Hour).Unix())}, rpm, exhausted("requests", 24*time.Hour)},
		{"two days: cut to the longest daily reset", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "172800"}, rpm, exhausted("requests", MaxDailyReset)},
		{"five minutes on a per-minute budget", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "300"}, rpm, exhausted("requests", 5*time.Minute)},
		{"two minutes: a bucket in debt refills, a rate limit", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "120"}, rpm, want{class: RateLimited, dim: "requests", retryAfter: 2 * time.Minute}},
		{"two minutes and a second is rounding: a rate limit", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "121"}, rpm, want{class: RateLimited, dim: "requests", retryAfter: MaxPerMinuteWait}},
		{"within the minute: a rate limit", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "45"}, rpm, want{class: RateLimited, dim: "requests", retryAfter: 45 * time.Second}},
		{"gemini per-minute quota stating a day", capacity.Gemini, map[string]string{"date": date},
			geminiQuotaBody("GenerateContentInputTokensPerModelPerMinute-FreeTier", "86400s"),
			want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: "input_tokens",
				quota: "GenerateContentInputTokensPerModelPerMinute-FreeTier", retryAfter: 24 * time.Hour, resetAt: t0.Add(24 * time.Hour)}},
		{"no known budget stating a day: an hour", capacity.OpenAI,
			map[string]string{"date": date, "retry-after": "86400"}, openAIBody("", "rate_limit_exceeded", "Rate limit reached."),
			exhausted("", MaxUnknownWait)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ClassifyHTTP(tt.provider, 429, fixtureHeader(tt.header), []byte(tt.body), t0)
			tt.want.check(t, v)
			require.False(t, v.Retryable == (tt.want.class == QuotaExhausted), "exhaustion is terminal, a rate limit is retried")
		})
	}
}
