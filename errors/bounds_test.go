package errors

import (
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
