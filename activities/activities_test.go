package activities_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/capacity"
	tgerrors "github.com/tollgate-dev/tollgate/errors"
	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestEstimateOpenAITokensUsesTheTokenizer(t *testing.T) {
	msgs := []activities.Message{{Role: "user", Content: "Hello, world! How are you today?"}}
	// o200k_base: "Hello", ",", " world", "!", " How", " are", " you", " today", "?" = 9 tokens.
	assert.Equal(t, int64(3+4+9), activities.EstimateOpenAITokens("gpt-4o", msgs))
	assert.Greater(t, activities.EstimateOpenAITokens("gpt-4", msgs), int64(7))
}

func TestEstimateAnthropicTokensErrsHigh(t *testing.T) {
	text := "The quick brown fox jumps over the lazy dog, again and again, until the end."
	got := activities.EstimateAnthropicTokens("be brief", []activities.Message{{Role: "user", Content: text}})
	// ~3.5 bytes a token for English: the estimate must not be below that.
	assert.GreaterOrEqual(t, got, int64(len(text))*10/35)
	assert.Equal(t, int64(3+4+3+4+26), got)
}

func TestTollgateCall(t *testing.T) {
	oa := activities.OpenAIChatRequest{Model: "gpt-4o-2024-08-06", Credential: "team-a", MaxTokens: 256,
		Messages: []activities.Message{{Content: "hi"}}, Class: capacity.Interactive}
	c := oa.TollgateCall()
	assert.Equal(t, capacity.OpenAI, c.Provider)
	assert.Equal(t, "team-a", c.Credential)
	assert.Equal(t, int64(256), c.Demand.MaxTokens)
	assert.Equal(t, capacity.Interactive, c.Class)
	assert.Positive(t, c.Demand.InputTokens)
	assert.False(t, c.Demand.InputEstimated, "tiktoken's count is used as it is")
	oa.UsageKey = "summarize"
	assert.Equal(t, "summarize", oa.TollgateCall().UsageKey)

	an := activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "team-a", MaxTokens: 4096,
		ThinkingBudget: 2048, ExpectedOutputTokens: 500, Messages: []activities.Message{{Content: "hi"}}, InputTokens: 77}
	c = an.TollgateCall()
	assert.Equal(t, capacity.Anthropic, c.Provider)
	assert.Equal(t, int64(77), c.Demand.InputTokens, "a caller's count wins")
	assert.False(t, c.Demand.InputEstimated, "a caller's count is exact")
	an.InputTokens = 0
	assert.True(t, an.TollgateCall().Demand.InputEstimated, "bytes / 3 is an estimate")
	assert.Equal(t, int64(2548), c.Demand.OutputTokens, "thinking is output")
	an.ExpectedOutputTokens = 0
	assert.Equal(t, int64(0), an.TollgateCall().Demand.OutputTokens, "none expected: the profile reserves max_tokens")
}

func TestCredentials(t *testing.T) {
	s := activities.StaticCredentials{"team-a": "sk-a"}
	k, err := s.APIKey(context.Background(), "team-a")
	require.NoError(t, err)
	assert.Equal(t, "sk-a", k)
	_, err = s.APIKey(context.Background(), "team-b")
	assert.ErrorIs(t, err, activities.ErrUnknownCredential)

	t.Setenv("TEST_KEY_TEAM_A", "sk-env")
	k, err = activities.EnvCredentials{Prefix: "TEST_KEY_"}.APIKey(context.Background(), "team-a")
	require.NoError(t, err)
	assert.Equal(t, "sk-env", k)
	_, err = activities.EnvCredentials{Prefix: "TEST_KEY_"}.APIKey(context.Background(), "missing")
	assert.ErrorIs(t, err, activities.ErrUnknownCredential)
}

func TestInvalidRequestsAreBadRequests(t *testing.T) {
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: activities.StaticCredentials{}})
	require.NoError(t, err)
	for _, req := range []activities.OpenAIChatRequest{
		{},
		{Model: "gpt-4o", Credential: "a", Messages: []activities.Message{{Content: "x"}}}, // no MaxTokens
		{Model: "gpt-4o", Credential: "a", MaxTokens: 10},                                  // no messages
		{Model: "gpt-4o", MaxTokens: 10, Messages: []activities.Message{{Content: "x"}}},   // no credential
	} {
		_, err := oa.Chat(context.Background(), req)
		var ae *temporal.ApplicationError
		require.True(t, errors.As(err, &ae))
		assert.Equal(t, tgerrors.TypeBadRequest, ae.Type())
		assert.True(t, ae.NonRetryable())
	}
	_, err = oa.Chat(context.Background(), activities.OpenAIChatRequest{Model: "gpt-4o", Credential: "nobody", MaxTokens: 10, Messages: []activities.Message{{Content: "x"}}})
	assert.True(t, tgerrors.IsMisconfigured(err), "a credential the worker lacks")
	_, err = activities.NewOpenAI(activities.OpenAIOptions{})
	assert.Error(t, err)
	_, err = activities.NewAnthropic(activities.AnthropicOptions{})
	assert.Error(t, err)
}

// Run ungated (no plugin), a provider failure is classified by the activity
// itself and returned as a secret-free ApplicationError, after one request:
// the SDKs do not retry.
func TestUngatedFailuresAreClassified(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{Models: []testsuite.Model{
		{Name: "gpt-4o-mini", Provider: testsuite.OpenAI, Limits: testsuite.Limits{RequestsPerMinute: 1}},
		{Name: "claude-sonnet-4-5", Provider: testsuite.Anthropic, Limits: testsuite.Limits{RequestsPerMinute: 1}},
	}})
	require.NoError(t, err)
	defer fp.Close()
	creds := activities.StaticCredentials{"default": testsuite.DefaultKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL()})
	require.NoError(t, err)
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: fp.AnthropicBaseURL()})
	require.NoError(t, err)
	ctx := context.Background()
	msgs := []activities.Message{{Role: "user", Content: "hello"}}

	res, err := oa.Chat(ctx, activities.OpenAIChatRequest{Model: "gpt-4o-mini", Credential: "default", MaxTokens: 20, Messages: msgs})
	require.NoError(t, err)
	assert.NotEmpty(t, res.Text)
	assert.Equal(t, testsuite.PromptTokens("hello"), res.Usage.InputTokens)
	assert.Positive(t, res.Usage.OutputTokens)
	assert.NotEmpty(t, res.Header.Get("x-ratelimit-remaining-requests"))
	assert.Empty(t, res.Header.Get("content-type"), "only rate-limit headers are kept")

	_, err = oa.Chat(ctx, activities.OpenAIChatRequest{Model: "gpt-4o-mini", Credential: "default", MaxTokens: 20, Messages: msgs})
	assert.True(t, tgerrors.IsRateLimited(err), "the second request in a minute: %v", err)
	assert.NotContains(t, err.Error(), testsuite.DefaultKey)

	ares, err := an.Messages(ctx, activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "default", MaxTokens: 20, Messages: msgs})
	require.NoError(t, err)
	assert.Positive(t, ares.Usage.OutputTokens)
	assert.NotEmpty(t, ares.Header.Get("anthropic-ratelimit-requests-remaining"))
	_, err = an.Messages(ctx, activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "default", MaxTokens: 20, Messages: msgs})
	assert.True(t, tgerrors.IsRateLimited(err), "%v", err)
	// One retry layer: each 429 reached the provider once. The SDKs' own
	// retries (two by default, for a 429) are off; Temporal retries.
	assert.Len(t, fp.Entries(), 4, "one request per call")
}

// A provider that answers 200 with garbage (an HTML page, a truncated
// answer, JSON null, another JSON object) fails the call with a retryable
// Unknown or Transient error, never a panic and never an empty "answer".
func TestGarbageAnswersAreFailures(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{
		Models: []testsuite.Model{
			{Name: "gpt-4o-mini", Provider: testsuite.OpenAI},
			{Name: "claude-sonnet-4-5", Provider: testsuite.Anthropic},
		},
		Seed:   5,
		Faults: testsuite.Faults{Garbage: 1},
	})
	require.NoError(t, err)
	defer fp.Close()
	creds := activities.StaticCredentials{"default": testsuite.DefaultKey}
	oa, err := activities.NewOpenAI(activities.OpenAIOptions{Credentials: creds, BaseURL: fp.OpenAIBaseURL()})
	require.NoError(t, err)
	an, err := activities.NewAnthropic(activities.AnthropicOptions{Credentials: creds, BaseURL: fp.AnthropicBaseURL()})
	require.NoError(t, err)
	ctx := context.Background()
	msgs := []activities.Message{{Role: "user", Content: "hello"}}
	for i := range 24 {
		var err error
		if i%2 == 0 {
			_, err = oa.Chat(ctx, activities.OpenAIChatRequest{Model: "gpt-4o-mini", Credential: "default", MaxTokens: 20, Messages: msgs})
		} else {
			_, err = an.Messages(ctx, activities.AnthropicMessagesRequest{Model: "claude-sonnet-4-5", Credential: "default", MaxTokens: 20, Messages: msgs})
		}
		var ae *temporal.ApplicationError
		require.ErrorAs(t, err, &ae, "call %d", i)
		assert.Contains(t, []string{tgerrors.TypeUnknown, tgerrors.TypeTransient}, ae.Type(), "call %d: %v", i, err)
		assert.False(t, ae.NonRetryable(), "call %d", i)
	}
	assert.Equal(t, 24, fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: "gpt-4o-mini"}).ByCause[testsuite.CauseGarbage]+
		fp.Report(testsuite.Scope{Key: testsuite.DefaultKey, Model: "claude-sonnet-4-5"}).ByCause[testsuite.CauseGarbage])
}
