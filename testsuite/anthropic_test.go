package testsuite_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

var antLimits = testsuite.Limits{RequestsPerMinute: 50, InputTokensPerMinute: 30000, OutputTokensPerMinute: 8000}

func TestAnthropicSuccessParsesUsageAndHeaders(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, antLimits)
	out, resp, err := message(t, anthropicClient(fp), "hello world!", 1000)
	require.NoError(t, err)

	require.Equal(t, int64(7), out.Usage.InputTokens)
	require.Equal(t, int64(7), out.Usage.OutputTokens)
	require.Equal(t, int64(0), out.Usage.CacheReadInputTokens)
	require.Equal(t, anthropic.StopReasonEndTurn, out.StopReason)
	require.Equal(t, "tok tok tok tok tok tok tok", out.Content[0].Text)

	want := map[string]string{
		"anthropic-ratelimit-requests-limit":          "50",
		"anthropic-ratelimit-requests-remaining":      "49",
		"anthropic-ratelimit-requests-reset":          "2026-10-15T12:00:01.2Z",
		"anthropic-ratelimit-input-tokens-limit":      "30000",
		"anthropic-ratelimit-input-tokens-remaining":  "29993", // max_tokens is not charged
		"anthropic-ratelimit-input-tokens-reset":      "2026-10-15T12:00:00.014Z",
		"anthropic-ratelimit-output-tokens-limit":     "8000",
		"anthropic-ratelimit-output-tokens-remaining": "7993", // the 7 tokens produced
		"anthropic-ratelimit-output-tokens-reset":     "2026-10-15T12:00:00.053Z",
		"anthropic-ratelimit-tokens-limit":            "38000",
		"anthropic-ratelimit-tokens-remaining":        "37986",
		"anthropic-ratelimit-tokens-reset":            "2026-10-15T12:00:00.053Z",
	}
	for k, v := range want {
		require.Equal(t, v, resp.Header.Get(k), k)
	}
	reset, err := time.Parse(time.RFC3339, resp.Header.Get("anthropic-ratelimit-requests-reset"))
	require.NoError(t, err)
	require.Equal(t, t0.Add(1200*time.Millisecond), reset)
	require.NotEmpty(t, resp.Header.Get("request-id"))

	e := fp.Entries()[0]
	require.Equal(t, int64(7), e.Charged[testsuite.InputTokens])
	require.Equal(t, int64(0), e.Charged[testsuite.OutputTokens])
	require.Equal(t, int64(7), e.Settled[testsuite.OutputTokens])
}

func TestAnthropicOutputMeteredOnProduction(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{OutputTokensPerMinute: 100},
		func(o *testsuite.Options) { o.Output = testsuite.FixedOutput(80) })
	c := anthropicClient(fp)
	for _, remaining := range []string{"20", "0"} { // the second goes into debt: 20 − 80
		_, resp, err := message(t, c, "hi", 4000)
		require.NoError(t, err)
		require.Equal(t, remaining, resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"))
	}
	_, _, err := message(t, c, "hi", 4000)
	apiErr := anthropicErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "rate_limit_error", string(apiErr.Type()))
	require.JSONEq(t, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 100 output tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits."},"request_id":"`+apiErr.RequestID+`"}`, apiErr.RawJSON())
	require.Equal(t, "37", apiErr.Response.Header.Get("retry-after")) // 61 tokens at 100/min = 36.6s
}

func TestAnthropicInput429WhileRequestsRemain(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{RequestsPerMinute: 50, InputTokensPerMinute: 1000})
	c := anthropicClient(fp)
	_, _, err := message(t, c, text(2000), 100) // 504 input tokens
	require.NoError(t, err)
	_, _, err = message(t, c, text(2000), 100)
	apiErr := anthropicErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Contains(t, apiErr.RawJSON(), "of 1,000 input tokens per minute")
	h := apiErr.Response.Header
	require.Equal(t, "1", h.Get("retry-after")) // 8 tokens at 1000/min = 480ms
	require.Equal(t, "48", h.Get("anthropic-ratelimit-requests-remaining"))
	require.Equal(t, "496", h.Get("anthropic-ratelimit-input-tokens-remaining"))
	require.Equal(t, map[testsuite.Cause]int{testsuite.CauseInputTokens: 1}, fp.Report(scopeOf(claude)).RateLimited)
}

func TestAnthropicCacheReadsAreNotChargedToITPM(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{}, testsuite.Limits{InputTokensPerMinute: 100000})
	c := anthropicClient(fp)
	send := func() *anthropic.Message {
		out, err := c.Messages.New(t.Context(), anthropic.MessageNewParams{
			Model: claude, MaxTokens: 100,
			System:   []anthropic.TextBlockParam{{Text: text(4000), CacheControl: anthropic.NewCacheControlEphemeralParam()}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		})
		require.NoError(t, err)
		return out
	}
	// system: 4 + 1000 tokens (cached prefix); user: 4 + 1.
	tests := []struct {
		name               string
		advance            time.Duration
		input, write, read int64
		chargedInput       int64
	}{
		{name: "write", input: 5, write: 1004, chargedInput: 1009},
		{name: "read", advance: time.Minute, input: 5, read: 1004, chargedInput: 5},
		{name: "expired", advance: 6 * time.Minute, input: 5, write: 1004, chargedInput: 1009},
	}
	for i, tt := range tests {
		clock.Advance(tt.advance)
		out := send()
		require.Equal(t, tt.input, out.Usage.InputTokens, tt.name)
		require.Equal(t, tt.write, out.Usage.CacheCreationInputTokens, tt.name)
		require.Equal(t, tt.read, out.Usage.CacheReadInputTokens, tt.name)
		require.Equal(t, tt.chargedInput, fp.Entries()[i].Charged[testsuite.InputTokens], tt.name)
	}
}

func TestAnthropicPerSecondEnforcement(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{}, testsuite.Limits{RequestsPerMinute: 60, BurstWindow: testsuite.PerSecond})
	c := anthropicClient(fp)
	_, _, err := message(t, c, "hi", 10)
	require.NoError(t, err)
	_, _, err = message(t, c, "hi", 10)
	apiErr := anthropicErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "60", apiErr.Response.Header.Get("anthropic-ratelimit-requests-limit"))
	require.Equal(t, "0", apiErr.Response.Header.Get("anthropic-ratelimit-requests-remaining"))
	require.Equal(t, "2", apiErr.Response.Header.Get("retry-after")) // the refusal cost one more request
	clock.Advance(2 * time.Second)
	_, _, err = message(t, c, "hi", 10)
	require.NoError(t, err)
}

func TestAnthropicOverloaded(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, antLimits)
	require.NoError(t, fp.SetFaults(testsuite.Faults{Overloaded: 1}))
	_, _, err := message(t, anthropicClient(fp), "hi", 10)
	apiErr := anthropicErr(t, err)
	require.Equal(t, 529, apiErr.StatusCode)
	require.Equal(t, "overloaded_error", string(apiErr.Type()))
	e := fp.Entries()[0]
	require.Equal(t, testsuite.CauseOverloaded, e.Cause)
	require.Equal(t, testsuite.Charges{}, e.Charged)
	require.Equal(t, "50", apiErr.Response.Header.Get("anthropic-ratelimit-requests-remaining"))
}

func TestAnthropicPromptTooLong(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: claude, Provider: testsuite.Anthropic, ContextWindow: 1000, MaxOutputTokens: 500},
	}})
	require.NoError(t, err)
	defer fp.Close()
	c := anthropicClient(fp)
	tests := []struct {
		prompt    string
		maxTokens int64
		message   string
	}{
		{text(4000), 10, "prompt is too long: 1004 tokens > 1000 maximum"},
		{text(2000), 500, "input length and `max_tokens` exceed context limit: 504 + 500 > 1000, decrease input length or `max_tokens` and try again"},
		{"hi", 501, "max_tokens: 501 > 500, which is the maximum allowed number of output tokens for " + claude},
	}
	for _, tt := range tests {
		_, _, err := message(t, c, tt.prompt, tt.maxTokens)
		apiErr := anthropicErr(t, err)
		require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
		require.Equal(t, "invalid_request_error", string(apiErr.Type()))
		require.Contains(t, apiErr.RawJSON(), tt.message)
	}
}

func TestAnthropicDailyQuota(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{RequestsPerDay: 1})
	c := anthropicClient(fp)
	_, _, err := message(t, c, "hi", 10)
	require.NoError(t, err)
	_, _, err = message(t, c, "hi", 10)
	apiErr := anthropicErr(t, err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Contains(t, apiErr.RawJSON(), "You have reached your specified API usage limits. You will regain access on 2026-10-16 at 00:00 UTC.")
	require.Equal(t, 1, fp.Report(scopeOf(claude)).ByCause[testsuite.CauseDailyQuota])
}

func TestAnthropicAuthToken(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, antLimits)
	c := anthropic.NewClient(aoption.WithBaseURL(fp.AnthropicBaseURL()),
		aoption.WithAuthToken(testsuite.DefaultKey), aoption.WithMaxRetries(0))
	_, _, err := message(t, c, "hi", 10)
	require.NoError(t, err)
}
