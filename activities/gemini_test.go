package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestGeminiTollgateCall(t *testing.T) {
	r := activities.GeminiGenerateRequest{Model: "gemini-2.5-flash", Credential: "team-a", MaxTokens: 4096,
		ThinkingBudget: 1024, ExpectedOutputTokens: 300, Messages: []activities.Message{{Content: "hi"}}, Class: capacity.Bulk}
	c := r.TollgateCall()
	assert.Equal(t, capacity.Gemini, c.Provider)
	assert.Equal(t, "team-a", c.Credential)
	assert.Equal(t, capacity.Bulk, c.Class)
	assert.Equal(t, int64(1324), c.Demand.OutputTokens, "thinking is output")
	assert.Equal(t, int64(4096), c.Demand.MaxTokens)
	assert.Equal(t, activities.EstimateGeminiTokens("", r.Messages), c.Demand.InputTokens)
	assert.True(t, c.Demand.InputEstimated)
	r.InputTokens, r.UsageKey = 77, "classify"
	c = r.TollgateCall()
	assert.Equal(t, int64(77), c.Demand.InputTokens, "a caller's count wins")
	assert.False(t, c.Demand.InputEstimated)
	assert.Equal(t, "classify", c.UsageKey)
}

func TestGeminiInvalidRequestsAreBadRequests(t *testing.T) {
	gm, err := activities.NewGemini(activities.GeminiOptions{Credentials: activities.StaticCredentials{}})
	require.NoError(t, err)
	msgs := []activities.Message{{Content: "x"}}
	for _, req := range []activities.GeminiGenerateRequest{
		{},
		{Model: "gemini-2.5-flash", Credential: "a", Messages: msgs},                                    // no MaxTokens
		{Model: "gemini-2.5-flash", Credential: "a", MaxTokens: 10},                                     // no messages
		{Model: "gemini-2.5-flash", MaxTokens: 10, Messages: msgs},                                      // no credential
		{Model: "gemini-2.5-flash", Credential: "a", MaxTokens: 10, ThinkingBudget: -1, Messages: msgs}, // negative budget
		{Model: "gemini-2.5-flash", Credential: "a", MaxTokens: 1 << 40, Messages: msgs},                // over int32
	} {
		_, err := gm.GenerateContent(context.Background(), req)
		assert.True(t, tgerrors.IsBadRequest(err), "%+v: %v", req, err)
	}
	_, err = gm.GenerateContent(context.Background(), activities.GeminiGenerateRequest{Model: "gemini-2.5-flash", Credential: "nobody", MaxTokens: 10, Messages: msgs})
	assert.True(t, tgerrors.IsMisconfigured(err), "a credential the worker lacks")
	_, err = activities.NewGemini(activities.GeminiOptions{})
	assert.Error(t, err)
}

// Run ungated, Gemini's 429 RESOURCE_EXHAUSTED is classified by the activity:
// per minute it is RateLimited, per day QuotaExhausted until midnight Pacific.
func TestGeminiUngated(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: "gemini-2.5-flash", Provider: testsuite.Gemini, Limits: testsuite.Limits{RequestsPerMinute: 1}},
		{Name: "gemini-2.5-pro", Provider: testsuite.Gemini, Limits: testsuite.Limits{RequestsPerDay: 1}},
	}, Output: testsuite.FixedOutput(9)})
	require.NoError(t, err)
	defer fp.Close()
	gm, err := activities.NewGemini(activities.GeminiOptions{Credentials: activities.StaticCredentials{"default": testsuite.DefaultKey},
		BaseURL: fp.GeminiBaseURL(), RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	ctx := context.Background()
	req := activities.GeminiGenerateRequest{Model: "gemini-2.5-flash", Credential: "default", MaxTokens: 20, ThinkingBudget: 8,
		System: "be brief", Messages: []activities.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}, {Role: "user", Content: "again"}}}

	res, err := gm.GenerateContent(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, testsuite.PromptTokens("be brief", "hello", "hi", "again"), res.Usage.InputTokens)
	assert.Equal(t, int64(5), res.Usage.OutputTokens, "candidatesTokenCount")
	assert.Equal(t, int64(4), res.Usage.ExtraReasoningTokens, "thoughtsTokenCount")
	assert.Equal(t, "tok tok tok tok tok", res.Text)
	assert.Equal(t, "STOP", res.FinishReason)
	assert.Equal(t, "gemini-2.5-flash", res.Model)
	assert.NotEmpty(t, res.Header.Get("Date"))
	assert.Empty(t, res.Header.Get("Content-Type"), "only rate-limit headers are kept")
	rep := res.TollgateReport()
	assert.True(t, rep.HasUsage)

	_, err = gm.GenerateContent(ctx, req)
	assert.True(t, tgerrors.IsRateLimited(err), "the second request in a minute: %v", err)
	assert.NotContains(t, err.Error(), testsuite.DefaultKey)

	req.Model = "gemini-2.5-pro"
	_, err = gm.GenerateContent(ctx, req)
	require.NoError(t, err)
	_, err = gm.GenerateContent(ctx, req)
	require.True(t, tgerrors.IsQuotaExhausted(err), "%v", err)
	d, ok := tgerrors.DetailsOf(err)
	require.True(t, ok)
	assert.Equal(t, "requests_per_day", d.Dimension)
	pacific, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	want := capacity.DayBoundary{Location: pacific}.Next(time.Now())
	assert.WithinDuration(t, want, d.ResetAt, 2*time.Second, "midnight Pacific")
}
