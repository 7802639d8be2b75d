package testsuite_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestOpenAISuccessParsesUsageAndHeaders(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 60, TokensPerMinute: 30000}, testsuite.Limits{})
	out, resp, err := chat(t, openaiClient(fp), "hello world!", 100)
	require.NoError(t, err)

	input := testsuite.PromptTokens("hello world!")
	require.Equal(t, int64(7), input)
	require.Equal(t, input, out.Usage.PromptTokens)
	require.Equal(t, int64(7), out.Usage.CompletionTokens)
	require.Equal(t, int64(14), out.Usage.TotalTokens)
	require.Equal(t, "tok tok tok tok tok tok tok", out.Choices[0].Message.Content)
	require.Equal(t, int64(7), testsuite.CountTokens(out.Choices[0].Message.Content))
	require.Equal(t, "stop", out.Choices[0].FinishReason)
	require.Equal(t, gpt, out.Model)

	want := map[string]string{
		"x-ratelimit-limit-requests":     "60",
		"x-ratelimit-remaining-requests": "59",
		"x-ratelimit-reset-requests":     "1s",
		"x-ratelimit-limit-tokens":       "30000",
		"x-ratelimit-remaining-tokens":   "29893", // 30000 − (7 input + 100 max_tokens)
		"x-ratelimit-reset-tokens":       "214ms", // 107 tokens at 500/s
		"date":                           "Thu, 15 Oct 2026 12:00:00 GMT",
	}
	for k, v := range want {
		require.Equal(t, v, resp.Header.Get(k), k)
	}
	require.NotEmpty(t, resp.Header.Get("x-request-id"))
}

func TestOpenAIBurstOverRPM(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{RequestsPerMinute: 5}, testsuite.Limits{})
	c := openaiClient(fp)
	for range 5 {
		_, _, err := chat(t, c, "hi", 10)
		require.NoError(t, err)
	}
	// Each refusal is charged one request: the wait grows by 12s each time.
	for i, wait := range []string{"24s", "36s", "48s"} {
		_, _, err := chat(t, c, "hi", 10)
		apiErr := openaiErr(t, err)
		require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode, i)
		require.Equal(t, "rate_limit_exceeded", apiErr.Code)
		require.Equal(t, "requests", apiErr.Type)
		require.Equal(t, "Rate limit reached for gpt-4o in organization org-tollgatefake on requests per min (RPM): Limit 5, Used 5, Requested 1. Please try again in "+wait+". Visit https://platform.openai.com/account/rate-limits to learn more.", apiErr.Message)
		h := apiErr.Response.Header
		require.Equal(t, "0", h.Get("x-ratelimit-remaining-requests"))
		require.Equal(t, strings.TrimSuffix(wait, "s"), h.Get("retry-after"))
	}
	// Without the refused requests' charges 36s would have earned 3 requests.
	clock.Advance(36 * time.Second)
	_, _, err := chat(t, c, "hi", 10)
	require.Equal(t, http.StatusTooManyRequests, openaiErr(t, err).StatusCode)

	r := fp.Report(scopeOf(gpt))
	require.Equal(t, map[testsuite.Cause]int{testsuite.CauseRequests: 4}, r.RateLimited)
}

func TestOpenAITokens429WhileRequestsRemain(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{RequestsPerMinute: 100, TokensPerMinute: 1000}, testsuite.Limits{})
	c := openaiClient(fp)
	prompt := text(2000) // 4 + 500 tokens, + 100 max_tokens = 604
	_, resp, err := chat(t, c, prompt, 100)
	require.NoError(t, err)
	require.Equal(t, "396", resp.Header.Get("x-ratelimit-remaining-tokens"))

	_, _, err = chat(t, c, prompt, 100)
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "tokens", apiErr.Type)
	require.Equal(t, "rate_limit_exceeded", apiErr.Code)
	require.Contains(t, apiErr.Message, "on tokens per min (TPM): Limit 1000, Used 604, Requested 604. Please try again in 12.48s.")
	h := apiErr.Response.Header
	require.Equal(t, "13", h.Get("retry-after"))
	require.Equal(t, "98", h.Get("x-ratelimit-remaining-requests"))
	require.Equal(t, "396", h.Get("x-ratelimit-remaining-tokens"))

	clock.Advance(12480 * time.Millisecond)
	_, _, err = chat(t, c, prompt, 100)
	require.NoError(t, err)
}

func TestOpenAIChargesMaxTokensWithoutRefund(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{TokensPerMinute: 10000}, testsuite.Limits{})
	c := openaiClient(fp)
	for _, remaining := range []string{"8995", "7990"} { // 5 input + 1000 max_tokens each; 7 produced
		out, resp, err := chat(t, c, "hi", 1000)
		require.NoError(t, err)
		require.Equal(t, int64(7), out.Usage.CompletionTokens)
		require.Equal(t, remaining, resp.Header.Get("x-ratelimit-remaining-tokens"))
	}
	e := fp.Entries()[0]
	require.Equal(t, int64(1005), e.Charged[testsuite.Tokens])
	require.Equal(t, testsuite.Charges{}, e.Settled)
}

func TestOpenAIDefaultMaxTokensIsChargedToo(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{TokensPerMinute: 100000}, testsuite.Limits{})
	_, resp, err := chat(t, openaiClient(fp), "hi", 0)
	require.NoError(t, err)
	require.Equal(t, "83611", resp.Header.Get("x-ratelimit-remaining-tokens")) // 100000 − (5 + 16384)
}

func TestOpenAIRequestTooLarge(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{TokensPerMinute: 1000}, testsuite.Limits{})
	_, _, err := chat(t, openaiClient(fp), text(4000), 10) // 1004 + 10
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "rate_limit_exceeded", apiErr.Code)
	require.Equal(t, "Request too large for gpt-4o in organization org-tollgatefake on tokens per min (TPM): Limit 1000, Requested 1014. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.", apiErr.Message)
	require.Empty(t, apiErr.Response.Header.Get("retry-after"))
	require.Equal(t, "1000", apiErr.Response.Header.Get("x-ratelimit-remaining-tokens"))
	require.Equal(t, 1, fp.Report(scopeOf(gpt)).RateLimited[testsuite.CauseTooLarge])
}

func TestOpenAIDailyQuota(t *testing.T) {
	for name, l := range map[string]testsuite.Limits{
		"requests": {RequestsPerDay: 2},
		"tokens":   {TokensPerDay: 1100}, // 505 per request
	} {
		t.Run(name, func(t *testing.T) {
			fp, clock := start(t, l, testsuite.Limits{})
			c := openaiClient(fp)
			for range 2 {
				_, _, err := chat(t, c, "hi", 500)
				require.NoError(t, err)
			}
			_, _, err := chat(t, c, "hi", 500)
			apiErr := openaiErr(t, err)
			require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
			require.Equal(t, "insufficient_quota", apiErr.Code)
			require.Equal(t, "insufficient_quota", apiErr.Type)
			require.Empty(t, apiErr.Response.Header.Get("retry-after"))

			clock.Set(time.Date(2026, 10, 16, 0, 0, 0, 0, time.UTC))
			_, _, err = chat(t, c, "hi", 500)
			require.NoError(t, err)
		})
	}
}

func TestOpenAISetLimitsTakesEffectAtOnce(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 100, TokensPerMinute: 10000}, testsuite.Limits{})
	c := openaiClient(fp)
	_, resp, err := chat(t, c, "hello world!", 100)
	require.NoError(t, err)
	require.Equal(t, "99", resp.Header.Get("x-ratelimit-remaining-requests"))

	// The provider cuts the budget: what was used stays used.
	require.NoError(t, fp.SetLimits(gpt, testsuite.Limits{RequestsPerMinute: 10, TokensPerMinute: 1000}))
	_, resp, err = chat(t, c, "hello world!", 100)
	require.NoError(t, err)
	require.Equal(t, "10", resp.Header.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "8", resp.Header.Get("x-ratelimit-remaining-requests"))
	require.Equal(t, "1000", resp.Header.Get("x-ratelimit-limit-tokens"))
	require.Equal(t, "786", resp.Header.Get("x-ratelimit-remaining-tokens")) // 1000 − 2×107

	require.NoError(t, fp.SetLimits(gpt, testsuite.Limits{RequestsPerMinute: 2}))
	_, _, err = chat(t, c, "hello world!", 100)
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "2", apiErr.Response.Header.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "0", apiErr.Response.Header.Get("x-ratelimit-remaining-requests"))
	require.Empty(t, apiErr.Response.Header.Get("x-ratelimit-limit-tokens"))

	l, err := fp.Limits(scopeOf(gpt))
	require.NoError(t, err)
	require.Equal(t, testsuite.Limits{RequestsPerMinute: 2}, l)
}

func TestOpenAIContextLengthExceeded(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: gpt, Provider: testsuite.OpenAI, ContextWindow: 1000, MaxOutputTokens: 500},
	}})
	require.NoError(t, err)
	defer fp.Close()
	c := openaiClient(fp)

	_, _, err = chat(t, c, text(4000), 10)
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "context_length_exceeded", apiErr.Code)
	require.Equal(t, "This model's maximum context length is 1000 tokens. However, your messages resulted in 1004 tokens. Please reduce the length of the messages.", apiErr.Message)

	_, _, err = chat(t, c, text(2000), 500)
	apiErr = openaiErr(t, err)
	require.Equal(t, "context_length_exceeded", apiErr.Code)
	require.Contains(t, apiErr.Message, "you requested 1004 tokens (504 in the messages, 500 in the completion)")

	_, _, err = chat(t, c, "hi", 501)
	apiErr = openaiErr(t, err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "max_tokens", apiErr.Param)
}

func TestTagHeaderIsRecorded(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{})
	c := openaiClient(fp)
	long := strings.Repeat("t", testsuite.MaxTagLength+10)
	for _, tag := range []string{"tenant-a/7", "", long} {
		_, err := c.Chat.Completions.New(t.Context(), chatParams(gpt), option.WithHeader(testsuite.TagHeader, tag))
		require.NoError(t, err)
	}
	entries := fp.Entries()
	require.Len(t, entries, 3)
	require.Equal(t, "tenant-a/7", entries[0].Tag)
	require.Empty(t, entries[1].Tag)
	require.Equal(t, long[:testsuite.MaxTagLength], entries[2].Tag)
}
