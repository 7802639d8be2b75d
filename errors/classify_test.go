package errors

import (
	"context"
	stderrors "errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
)

// want is the part of a Verdict a test states.
type want struct {
	class      Class
	reason     Reason
	dim        string
	quota      string
	retryAfter time.Duration
	resetAt    time.Time
}

func (w want) check(t *testing.T, v Verdict) {
	t.Helper()
	got := want{class: v.Class, reason: v.Reason, quota: v.QuotaID, retryAfter: v.RetryAfter, resetAt: v.ResetAt}
	if v.HasDimension {
		got.dim = v.Dimension.String()
	}
	require.Equal(t, w, got, "verdict %s", v)
	require.Equal(t, v.Class.Retryable(), v.Retryable)
}

func geminiQuotaBody(quotaID, retryDelay string) string {
	return fmt.Sprintf(`{"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
		"details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": %q}]},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": %q}]}}`, quotaID, retryDelay)
}

func openAIBody(typ, code, msg string) string {
	return fmt.Sprintf(`{"error": {"message": %q, "type": %q, "param": null, "code": %q}}`, msg, typ, code)
}

func TestClassifyHTTP(t *testing.T) {
	t0 := fixtureTime
	date := map[string]string{"date": t0.Format(http.TimeFormat)}
	with := func(kv ...string) map[string]string {
		m := map[string]string{"date": date["date"]}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		provider capacity.Provider
		status   int
		header   map[string]string
		body     string
		now      time.Time
		want     want
	}{
		{
			name: "per-minute wait of five minutes is exhaustion", provider: capacity.OpenAI, status: 429,
			header: with("retry-after", "300"),
			body:   openAIBody("requests", "rate_limit_exceeded", "Rate limit reached on requests per min (RPM)."),
			now:    t0,
			want: want{class: QuotaExhausted, reason: ReasonWaitExceedsBound, dim: "requests",
				retryAfter: 5 * time.Minute, resetAt: t0.Add(5 * time.Minute)},
		},
		{
			name: "wait of no known budget past the bound is exhaustion", provider: capacity.OpenAI, status: 429,
			header: with("retry-after", "300"),
			body:   openAIBody("", "rate_limit_exceeded", "Rate limit reached."),
			now:    t0,
			want: want{class: QuotaExhausted, reason: ReasonWaitExceedsBound,
				retryAfter: 300 * time.Second, resetAt: t0.Add(300 * time.Second)},
		},
		{
			name: "openai per-day limit is a daily quota", provider: capacity.OpenAI, status: 429,
			header: date,
			body: openAIBody("tokens", "rate_limit_exceeded",
				"Rate limit reached for gpt-4o in organization org-x on tokens per day (TPD): Limit 2000000, Used 1999000, Requested 4000. Please try again in 7m12s."),
			now: t0,
			want: want{class: QuotaExhausted, reason: ReasonDailyQuota, dim: "tokens_per_day",
				retryAfter: 7*time.Minute + 12*time.Second, resetAt: t0.Add(7*time.Minute + 12*time.Second)},
		},
		{
			name: "message wait when nothing structured says one", provider: capacity.OpenAI, status: 429,
			header: date,
			body:   openAIBody("tokens", "rate_limit_exceeded", "Rate limit reached on tokens per min (TPM). Please try again in 1.209s."),
			now:    t0,
			want:   want{class: RateLimited, dim: "tokens", retryAfter: 1209 * time.Millisecond},
		},
		{
			name: "anthropic reset read against the date header, not a skewed clock", provider: capacity.Anthropic, status: 429,
			header: with("anthropic-ratelimit-tokens-remaining", "0",
				"anthropic-ratelimit-tokens-reset", t0.Add(21*time.Second).Format(time.RFC3339)),
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			now:  t0.Add(10 * time.Minute),
			want: want{class: RateLimited, dim: "tokens", retryAfter: 21 * time.Second},
		},
		{
			name: "reset at is on the caller's clock", provider: capacity.OpenAI, status: 429,
			header: with("retry-after", t0.Add(time.Hour).Format(http.TimeFormat)),
			body:   openAIBody("", "rate_limit_exceeded", "Rate limit reached."),
			now:    t0.Add(-time.Minute),
			want: want{class: QuotaExhausted, reason: ReasonWaitExceedsBound,
				retryAfter: time.Hour, resetAt: t0.Add(time.Hour - time.Minute)},
		},
		{
			name: "anthropic: several spent dimensions, the latest reset binds", provider: capacity.Anthropic, status: 429,
			header: with(
				"anthropic-ratelimit-requests-remaining", "0",
				"anthropic-ratelimit-requests-reset", t0.Add(time.Second).Format(time.RFC3339),
				"anthropic-ratelimit-output-tokens-remaining", "0",
				"anthropic-ratelimit-output-tokens-reset", t0.Add(9*time.Second).Format(time.RFC3339)),
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}`,
			now:  t0,
			want: want{class: RateLimited, dim: "output_tokens", retryAfter: 9 * time.Second},
		},
		{
			name: "gemini per-minute retry delay", provider: capacity.Gemini, status: 429, header: date,
			body: geminiQuotaBody("GenerateContentInputTokensPerModelPerMinute-FreeTier", "37.5s"),
			now:  t0,
			want: want{class: RateLimited, dim: "input_tokens",
				quota: "GenerateContentInputTokensPerModelPerMinute-FreeTier", retryAfter: 37500 * time.Millisecond},
		},
		{
			name: "gemini daily quota without retry delay resets at midnight Pacific", provider: capacity.Gemini, status: 429,
			header: date,
			body:   geminiQuotaBody("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "0s"),
			now:    t0,
			want: want{class: QuotaExhausted, reason: ReasonDailyQuota, dim: "requests_per_day",
				quota:   "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
				resetAt: time.Date(2026, 10, 16, 7, 0, 0, 0, time.UTC)}, // midnight PDT
		},
		{
			name: "gemini message retry hint", provider: capacity.Gemini, status: 429, header: date,
			body: `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Quota exceeded. Please retry in 12.5s."}}`,
			now:  t0,
			want: want{class: RateLimited, retryAfter: 12500 * time.Millisecond},
		},
		{
			name: "gemini location refused", provider: capacity.Gemini, status: 400, header: date,
			body: `{"error":{"code":400,"status":"FAILED_PRECONDITION","message":"User location is not supported for the API use."}}`,
			now:  t0, want: want{class: NoAccess},
		},
		{
			name: "gemini context too long", provider: capacity.Gemini, status: 400, header: date,
			body: `{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}}`,
			now:  t0, want: want{class: ContextTooLong, reason: ReasonContextLength},
		},
		{
			name: "anthropic billing error type", provider: capacity.Anthropic, status: 400, header: date,
			body: `{"type":"error","error":{"type":"billing_error","message":"billing"}}`,
			now:  t0, want: want{class: QuotaExhausted, reason: ReasonBilling},
		},
		{
			name: "overloaded with retry-after keeps the wait", provider: capacity.Anthropic, status: 529,
			header: with("retry-after", "3"),
			body:   `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			now:    t0, want: want{class: Overloaded, retryAfter: 3 * time.Second},
		},
		{name: "plain 503", provider: capacity.OpenAI, status: 503, body: "Service Unavailable", now: t0, want: want{class: Transient}},
		{name: "502 html", provider: capacity.OpenAI, status: 502, body: "<html>bad gateway</html>", now: t0, want: want{class: Transient}},
		{name: "504", provider: capacity.Anthropic, status: 504, now: t0, want: want{class: Transient}},
		{name: "408", provider: capacity.OpenAI, status: 408, now: t0, want: want{class: Transient}},
		{name: "422", provider: capacity.OpenAI, status: 422, body: `{"error":"bad field"}`, now: t0, want: want{class: BadRequest}},
		{name: "405", provider: capacity.OpenAI, status: 405, now: t0, want: want{class: BadRequest}},
		{name: "402", provider: capacity.OpenAI, status: 402, now: t0, want: want{class: QuotaExhausted, reason: ReasonBilling}},
		{name: "bare 429", provider: "other", status: 429, now: t0, want: want{class: RateLimited}},
		{name: "200 is not a failure", provider: capacity.OpenAI, status: 200, body: "{}", now: t0, want: want{class: Unknown}},
		{name: "nothing at all", provider: "", status: 0, now: t0, want: want{class: Unknown}},
		{
			name: "gemini streaming array body", provider: capacity.Gemini, status: 400,
			body: `[{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"API key not valid.","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}]`,
			now:  t0, want: want{class: BadCredential},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.check(t, ClassifyHTTP(tt.provider, tt.status, fixtureHeader(tt.header), []byte(tt.body), tt.now))
		})
	}
}

func TestClassifierMaxRateLimitWait(t *testing.T) {
	h := fixtureHeader(map[string]string{"retry-after": "300"})
	body := []byte(openAIBody("", "rate_limit_exceeded", "Rate limit reached."))
	c := Classifier{MaxRateLimitWait: 10 * time.Minute}
	v := c.ClassifyHTTP(capacity.OpenAI, 429, h, body, fixtureTime)
	want{class: RateLimited, retryAfter: 300 * time.Second}.check(t, v)
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyTransport(t *testing.T) {
	post := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://api.example.com/v1/chat?key=AIzaSyA1234567890abcdefghijklmnopqrstuv", Err: err}
	}
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, Unknown},
		{"eof", io.EOF, Transient},
		{"unexpected eof", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), Transient},
		{"reset", post(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), Transient},
		{"refused", post(syscall.ECONNREFUSED), Transient},
		{"dns", post(&net.DNSError{Err: "no such host", Name: "api.example.com"}), Transient},
		{"timeout", post(timeoutErr{}), Transient},
		{"goaway text", stderrors.New("http2: server sent GOAWAY and closed the connection"), Transient},
		{"canceled", post(context.Canceled), Canceled},
		{"deadline", post(context.DeadlineExceeded), Canceled},
		{"other", stderrors.New("something odd"), Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Classify(capacity.OpenAI, tt.err, fixtureTime)
			require.Equal(t, tt.want, v.Class)
			require.Equal(t, tt.want.Retryable(), v.Retryable)
			require.NotContains(t, v.Message, "AIza")
			require.NotContains(t, v.Message, "/v1/chat")
		})
	}
}

func TestClassifyContext(t *testing.T) {
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), fixtureTime)
	defer cancel2()

	// A client's own request timeout, with the caller's context live.
	v := ClassifyContext(live, capacity.OpenAI, fmt.Errorf("attempt: %w", context.DeadlineExceeded), fixtureTime)
	require.Equal(t, Transient, v.Class)

	v = ClassifyContext(done, capacity.OpenAI, fmt.Errorf("attempt: %w", context.Canceled), fixtureTime)
	require.Equal(t, Canceled, v.Class)
	require.ErrorIs(t, ActivityError(v, ""), context.Canceled)

	v = ClassifyContext(expired, capacity.OpenAI, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, fixtureTime)
	require.Equal(t, Canceled, v.Class)
	require.ErrorIs(t, ActivityError(v, ""), context.DeadlineExceeded)

	// The context ended, but the answer says something else.
	v = ClassifyContext(done, capacity.OpenAI, stderrors.New("something odd"), fixtureTime)
	require.Equal(t, Unknown, v.Class)
}

func TestClassString(t *testing.T) {
	for c := range Class(numClasses) {
		got, err := ParseClass(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
		text, err := c.MarshalText()
		require.NoError(t, err)
		var back Class
		require.NoError(t, back.UnmarshalText(text))
		require.Equal(t, c, back)
	}
	_, err := ParseClass("Nope")
	require.ErrorIs(t, err, ErrUnknownClass)
	require.Equal(t, "Class(42)", Class(42).String())
}
