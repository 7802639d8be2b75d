package testsuite_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestFaultConnResetIsChargedButUnanswered(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 10, TokensPerMinute: 1000}, testsuite.Limits{})
	require.NoError(t, fp.SetFaults(testsuite.Faults{ConnReset: 1}))
	_, _, err := chat(t, openaiClient(fp), "hi", 10)
	require.Error(t, err)
	var apiErr *openai.Error
	require.False(t, errors.As(err, &apiErr), "a reset is a transport error, not an API error")

	e := fp.Entries()[0]
	require.Equal(t, testsuite.CauseConnReset, e.Cause)
	require.Equal(t, 0, e.Status)
	require.True(t, e.Admitted)
	require.Equal(t, int64(15), e.Charged[testsuite.Tokens])
}

func TestFaultRateLimitedWithoutRetryAfter(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 10}, testsuite.Limits{})
	require.NoError(t, fp.SetFaults(testsuite.Faults{RateLimited: 1}))
	_, _, err := chat(t, openaiClient(fp), "hi", 10)
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Empty(t, apiErr.Response.Header.Get("retry-after"))
	require.Equal(t, "10", apiErr.Response.Header.Get("x-ratelimit-remaining-requests"), "injected 429s are not charged")
	require.Equal(t, testsuite.CauseInjectedRateLimit, fp.Entries()[0].Cause)
}

func TestFaultNoRetryAfterOnGenuine429(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 1}, testsuite.Limits{})
	require.NoError(t, fp.SetFaults(testsuite.Faults{NoRetryAfter: 1}))
	c := openaiClient(fp)
	_, _, err := chat(t, c, "hi", 10)
	require.NoError(t, err)
	_, _, err = chat(t, c, "hi", 10)
	apiErr := openaiErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Empty(t, apiErr.Response.Header.Get("retry-after"))
	require.Equal(t, "2m0s", apiErr.Response.Header.Get("x-ratelimit-reset-requests"))
}

func TestFaultShares(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{},
		func(o *testsuite.Options) {
			o.Seed = 42
			o.Faults = testsuite.Faults{Overloaded: 0.2, ServerError: 0.1}
		})
	for range 400 {
		resp, _ := post(t, fp.URL()+"/v1/chat/completions", "Authorization", "Bearer "+testsuite.DefaultKey,
			`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`)
		require.Contains(t, []int{200, 500, 503}, resp.StatusCode)
	}
	r := fp.Report(scopeOf(gpt))
	require.InDelta(t, 80, r.ByStatus[503], 25)
	require.InDelta(t, 40, r.ByStatus[500], 20)
	require.Equal(t, r.ByStatus[503], r.ByCause[testsuite.CauseOverloaded])
}

func TestLatencyAndConcurrencyCapOnManualClock(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{}, testsuite.Limits{MaxConcurrent: 1, OutputTokensPerMinute: 1000},
		func(o *testsuite.Options) {
			o.Latency = func(_ testsuite.Call, output int64) time.Duration { return time.Duration(output) * time.Second }
		})
	c := anthropicClient(fp)
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() { _, _, firstErr = message(t, c, "hi", 100) })
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)

	_, _, err := message(t, c, "hi", 100)
	apiErr := anthropicErr(t, err)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Contains(t, apiErr.RawJSON(), "Number of concurrent connections has exceeded your rate limit")
	require.Equal(t, "1", apiErr.Response.Header.Get("retry-after"))

	clock.Advance(7 * time.Second) // 7 output tokens → 7s
	wg.Wait()
	require.NoError(t, firstErr)
	entries := fp.Entries()
	require.Equal(t, 7*time.Second, entries[0].Latency)
	require.Equal(t, t0.Add(7*time.Second), entries[0].Done)
	require.Equal(t, testsuite.CauseConcurrency, entries[1].Cause)

	r := fp.Report(scopeOf(claude))
	require.Equal(t, map[testsuite.Cause]int{testsuite.CauseConcurrency: 1}, r.RateLimited)
}

func TestSlowFaultWaitsOnClock(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{}, testsuite.Limits{},
		func(o *testsuite.Options) { o.Faults = testsuite.Faults{Slow: 1, SlowLatency: 30 * time.Second} })
	done := make(chan error, 1)
	go func() { _, _, err := chat(t, openaiClient(fp), "hi", 5); done <- err }()
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)
	clock.Advance(30 * time.Second)
	require.NoError(t, <-done)
	require.Equal(t, 30*time.Second, fp.Entries()[0].Latency)
}

func TestSpendSharesTheBudget(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 10, TokensPerMinute: 1000}, testsuite.Limits{})
	e, err := fp.Spend(scopeOf(gpt), testsuite.Demand{InputTokens: 900, MaxTokens: 50, OutputTokens: 20})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, e.Status)
	require.True(t, e.Direct)
	require.Equal(t, int64(950), e.Charged[testsuite.Tokens])
	require.Equal(t, int64(50), e.Remaining[testsuite.Tokens])

	_, _, err = chat(t, openaiClient(fp), "hi", 100) // 105 > 50 left
	apiErr := openaiErr(t, err)
	require.Equal(t, "tokens", apiErr.Type)

	e, err = fp.Spend(scopeOf(gpt), testsuite.Demand{InputTokens: 100, MaxTokens: 10})
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, e.Status)
	require.Equal(t, testsuite.CauseTokens, e.Cause)

	_, err = fp.Spend(testsuite.Scope{Key: testsuite.DefaultKey, Model: "nope"}, testsuite.Demand{})
	require.ErrorIs(t, err, testsuite.ErrUnknownModel)
	_, err = fp.Spend(scopeOf(gpt), testsuite.Demand{InputTokens: 1, CacheReadTokens: 2})
	require.Error(t, err)
}

func TestSpendAnthropicChargesOutputAndSkipsCacheReads(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, antLimits)
	e, err := fp.Spend(scopeOf(claude), testsuite.Demand{InputTokens: 1000, CacheReadTokens: 800, MaxTokens: 4000, OutputTokens: 300})
	require.NoError(t, err)
	require.Equal(t, int64(200), e.Charged[testsuite.InputTokens])
	require.Equal(t, int64(300), e.Settled[testsuite.OutputTokens])
	require.Equal(t, int64(500), e.Cost(testsuite.TokensPerDay))
}

func TestCanceledRequestsAreChargedAndRecorded(t *testing.T) {
	fp, clock := start(t, testsuite.Limits{TokensPerMinute: 1000}, testsuite.Limits{},
		func(o *testsuite.Options) {
			o.Latency = func(testsuite.Call, int64) time.Duration { return time.Minute }
		})
	done := make(chan error, 1)
	go func() { _, _, err := chat(t, openaiClient(fp), "hi", 10); done <- err }()
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)

	fp.Close() // answers the waiting request by closing its connection
	require.Error(t, <-done)
	e := fp.Entries()[0]
	require.Equal(t, testsuite.CauseCanceled, e.Cause)
	require.Equal(t, 0, e.Status)
	require.Equal(t, int64(15), e.Charged[testsuite.Tokens])
}

func TestFaultGarbageIsChargedAndUnreadable(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{TokensPerMinute: 100_000}, testsuite.Limits{},
		func(o *testsuite.Options) { o.Seed = 3; o.Faults = testsuite.Faults{Garbage: 1} })
	c := openaiClient(fp)
	kinds := map[string]int{}
	for range 40 {
		out, resp, err := chat(t, c, "hi", 10)
		switch {
		case err != nil && strings.Contains(err.Error(), "text/html"):
			kinds["html"]++
		case err != nil && strings.Contains(err.Error(), "unexpected"):
			kinds["truncated"]++
		case err == nil && out == nil:
			kinds["null"]++
		case err == nil && len(out.Choices) == 0:
			kinds["wrong shape"]++
		default:
			t.Fatalf("not garbage: %v %+v", err, out)
		}
		if resp != nil {
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
	}
	require.Len(t, kinds, 4, "every kind of garbage: %v", kinds)
	for _, e := range fp.Entries() {
		require.Equal(t, testsuite.CauseGarbage, e.Cause)
		require.Equal(t, http.StatusOK, e.Status)
		require.True(t, e.Admitted, "garbage answers are charged")
		require.Equal(t, int64(15), e.Charged[testsuite.Tokens])
		require.Equal(t, int64(7), e.Usage.OutputTokens, "the output was produced")
	}
	r := fp.Report(scopeOf(gpt))
	require.Equal(t, 40, r.ByCause[testsuite.CauseGarbage])
}

func TestFaultBadHeadersKeepTheAnswer(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 100, TokensPerMinute: 100_000}, testsuite.Limits{},
		func(o *testsuite.Options) { o.Faults = testsuite.Faults{BadHeaders: 1} })
	out, resp, err := chat(t, openaiClient(fp), "hi", 10)
	require.NoError(t, err)
	require.Len(t, out.Choices, 1)
	require.Equal(t, "Thu, 01 Jan 1970 00:00:00 GMT", resp.Header.Get("Date"))
	require.NotEqual(t, "100", resp.Header.Get("x-ratelimit-limit-requests"))
	require.NotEqual(t, "99", resp.Header.Get("x-ratelimit-remaining-requests"))
	e := fp.Entries()[0]
	require.True(t, e.BadHeaders)
	require.Equal(t, testsuite.CauseNone, e.Cause)
}

func TestClientRequestIDIsRecorded(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{})
	c := openaiClient(fp)
	_, err := c.Chat.Completions.New(t.Context(), chatParams(gpt), option.WithHeader("X-Client-Request-Id", "batch-7/call-3#2"))
	require.NoError(t, err)
	_, _, err = chat(t, c, "hi", 5)
	require.NoError(t, err)
	es := fp.Entries()
	require.Equal(t, "batch-7/call-3#2", es[0].ClientRequestID)
	require.Empty(t, es[1].ClientRequestID)
}
