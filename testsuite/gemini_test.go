package testsuite_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/capacitytest"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	_ "github.com/tollgate-dev/tollgate/errors/geminierr" // reads genai.APIError for Classify
	"github.com/tollgate-dev/tollgate/testsuite"
)

const gemini = testsuite.DefaultGeminiModel

// startGemini runs a FakeProvider serving gemini with limits l on a manual
// clock at now, answering 7 output tokens.
func startGemini(t *testing.T, l testsuite.Limits, now time.Time) (*testsuite.FakeProvider, *capacitytest.ManualClock) {
	t.Helper()
	clock := capacitytest.NewManualClock(now)
	fp, err := testsuite.New(testsuite.Options{
		Models: []testsuite.Model{{Name: gemini, Provider: testsuite.Gemini, Limits: l}},
		Clock:  clock, Output: testsuite.FixedOutput(7),
	})
	require.NoError(t, err)
	t.Cleanup(fp.Close)
	return fp, clock
}

func geminiClient(t *testing.T, fp *testsuite.FakeProvider, key string) *genai.Client {
	t.Helper()
	one := int32(1)
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: fp.GeminiBaseURL(), RetryOptions: &genai.HTTPRetryOptions{Attempts: &one}}})
	require.NoError(t, err)
	return c
}

func generate(c *genai.Client, prompt string, maxTokens int32, thinking int32) (*genai.GenerateContentResponse, error) {
	cfg := &genai.GenerateContentConfig{MaxOutputTokens: maxTokens}
	if thinking > 0 {
		cfg.ThinkingConfig = &genai.ThinkingConfig{ThinkingBudget: &thinking}
	}
	return c.Models.GenerateContent(context.Background(), gemini, genai.Text(prompt), cfg)
}

// classify runs a genai error through tollgate's classifier at now.
func classify(err error, now time.Time) tgerrors.Verdict {
	return tgerrors.Classify(capacity.Gemini, err, now)
}

func TestGeminiAnswersWithUsageMetadata(t *testing.T) {
	fp, _ := startGemini(t, testsuite.Limits{RequestsPerMinute: 10, InputTokensPerMinute: 1000}, t0)
	out, err := generate(geminiClient(t, fp, testsuite.DefaultKey), "hello there", 20, 0)
	require.NoError(t, err)
	u := out.UsageMetadata
	require.Equal(t, int32(testsuite.PromptTokens("hello there")), u.PromptTokenCount)
	require.Equal(t, int32(7), u.CandidatesTokenCount)
	require.Equal(t, int32(0), u.ThoughtsTokenCount)
	require.Equal(t, u.PromptTokenCount+7, u.TotalTokenCount)
	require.Equal(t, "tok tok tok tok tok tok tok", out.Text())
	require.Equal(t, genai.FinishReasonStop, out.Candidates[0].FinishReason)
	require.Equal(t, gemini, out.ModelVersion)

	// Thinking: up to half the output is thoughts, reported apart.
	out, err = generate(geminiClient(t, fp, testsuite.DefaultKey), "hello there", 20, 100)
	require.NoError(t, err)
	require.Equal(t, int32(3), out.UsageMetadata.ThoughtsTokenCount)
	require.Equal(t, int32(4), out.UsageMetadata.CandidatesTokenCount)

	e := fp.Entries()[0]
	require.Equal(t, gemini, e.Scope.Model)
	require.Equal(t, testsuite.Gemini, e.Provider)
	require.Equal(t, testsuite.PromptTokens("hello there"), e.Charged[testsuite.InputTokens], "TPM is charged the input")
	require.Zero(t, e.Charged[testsuite.Tokens])
	require.Equal(t, testsuite.Charges{}, e.Settled, "output is not metered")
}

func TestGeminiPerMinute429IsResourceExhaustedWithRetryInfo(t *testing.T) {
	fp, clock := startGemini(t, testsuite.Limits{RequestsPerMinute: 2, InputTokensPerMinute: 60}, t0)
	c := geminiClient(t, fp, testsuite.DefaultKey)
	_, err := generate(c, "hi", 5, 0) // 5 tokens
	require.NoError(t, err)
	_, err = generate(c, "hi", 5, 0)
	require.NoError(t, err)
	_, err = generate(c, "hi", 5, 0)
	var apiErr genai.APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, 429, apiErr.Code)
	require.Equal(t, "RESOURCE_EXHAUSTED", apiErr.Status)
	require.Len(t, apiErr.Details, 3)
	require.Equal(t, "type.googleapis.com/google.rpc.QuotaFailure", apiErr.Details[0]["@type"])
	require.Equal(t, "type.googleapis.com/google.rpc.RetryInfo", apiErr.Details[2]["@type"])
	// 2 RPM: a request every 30 s, and the refused request was charged too.
	require.Equal(t, "60s", apiErr.Details[2]["retryDelay"])
	v := classify(err, clock.Now())
	require.Equal(t, tgerrors.RateLimited, v.Class)
	require.Equal(t, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", v.QuotaID)
	require.Equal(t, capacity.Requests, v.Dimension)
	require.Equal(t, time.Minute, v.RetryAfter)

	// The input-token quota: 200 tokens of prompt exceed 60 a minute.
	clock.Advance(2 * time.Minute)
	_, err = generate(c, text(200), 5, 0) // 54 tokens
	require.NoError(t, err)
	_, err = generate(c, text(200), 5, 0)
	v = classify(err, clock.Now())
	require.Equal(t, tgerrors.RateLimited, v.Class, "%v", err)
	require.Equal(t, "GenerateContentInputTokensPerModelPerMinute-FreeTier", v.QuotaID)
	require.Equal(t, capacity.InputTokens, v.Dimension)
	require.Equal(t, map[testsuite.Cause]int{testsuite.CauseRequests: 1, testsuite.CauseInputTokens: 1}, fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: gemini}).RateLimited)
}

// Gemini's daily quotas reset at midnight Pacific, not UTC: a quota spent at
// 23:30 UTC (16:30 PDT) is still spent after midnight UTC, and comes back at
// 07:00 UTC.
func TestGeminiDailyQuotaResetsAtMidnightPacific(t *testing.T) {
	start := time.Date(2026, 7, 15, 23, 30, 0, 0, time.UTC)
	fp, clock := startGemini(t, testsuite.Limits{RequestsPerDay: 1}, start)
	c := geminiClient(t, fp, testsuite.DefaultKey)
	_, err := generate(c, "hi", 5, 0)
	require.NoError(t, err)

	clock.Advance(time.Hour) // 00:30 UTC: a new UTC day, the same Pacific day
	_, err = generate(c, "hi", 5, 0)
	var apiErr genai.APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, 429, apiErr.Code)
	require.Equal(t, "RESOURCE_EXHAUSTED", apiErr.Status)
	midnightPacific := time.Date(2026, 7, 16, 7, 0, 0, 0, time.UTC)
	require.Equal(t, "23400s", apiErr.Details[2]["retryDelay"], "6 h 30 min to midnight PDT")
	v := classify(err, clock.Now())
	require.Equal(t, tgerrors.QuotaExhausted, v.Class)
	require.Equal(t, "GenerateRequestsPerDayPerProjectPerModel-FreeTier", v.QuotaID)
	require.Equal(t, capacity.RequestsPerDay, v.Dimension)
	require.True(t, v.ResetAt.Equal(midnightPacific), "reset at %v", v.ResetAt)

	clock.Advance(midnightPacific.Sub(clock.Now()) - time.Second)
	_, err = generate(c, "hi", 5, 0)
	require.Error(t, err, "one second before midnight Pacific")
	clock.Advance(time.Second)
	_, err = generate(c, "hi", 5, 0)
	require.NoError(t, err, "midnight Pacific")
}

func TestGeminiErrorShapes(t *testing.T) {
	fp, _ := startGemini(t, testsuite.Limits{}, t0)
	url := fp.URL() + "/v1beta/models/" + gemini + ":generateContent"
	const ok = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	tests := []struct {
		name, url, key, body string
		status               int
		want                 string
	}{
		{"bad key", url, "AIza-nope", ok, 400,
			`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]}}`},
		{"unknown model", fp.URL() + "/v1beta/models/gemini-9:generateContent", testsuite.DefaultKey, ok, 404,
			`{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}`},
		{"no contents", url, testsuite.DefaultKey, `{"contents":[]}`, 400,
			`{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`},
		{"malformed json", url, testsuite.DefaultKey, `{"contents":`, 400,
			`{"error":{"code":400,"message":"Invalid JSON payload received. Unexpected token.","status":"INVALID_ARGUMENT"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, tt.url, "X-Goog-Api-Key", tt.key, tt.body)
			require.Equal(t, tt.status, resp.StatusCode)
			require.JSONEq(t, tt.want, body)
		})
	}
	v := classify(genai.APIError{Code: 400, Status: "INVALID_ARGUMENT", Message: "API key not valid. Please pass a valid API key.",
		Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}}}, t0)
	require.Equal(t, tgerrors.BadCredential, v.Class)
	resp, _ := post(t, url+"?key="+testsuite.DefaultKey, "X-Unused", "", ok)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the key query parameter")
}

func TestGeminiLimitsAreValidated(t *testing.T) {
	_, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: gemini, Provider: testsuite.Gemini, Limits: testsuite.Limits{TokensPerMinute: 10}}}})
	require.ErrorContains(t, err, "InputTokensPerMinute")
}
