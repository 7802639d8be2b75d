package testsuite_test

import (
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/testsuite"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	model := func(p testsuite.Provider, l testsuite.Limits) []testsuite.Model {
		return []testsuite.Model{{Name: "m", Provider: p, Limits: l}}
	}
	tests := []struct {
		name string
		opts testsuite.Options
		want string
	}{
		{"unknown provider", testsuite.Options{Models: model("mistral", testsuite.Limits{})}, `unknown Provider "mistral"`},
		{"empty model name", testsuite.Options{Models: []testsuite.Model{{Provider: testsuite.OpenAI}}}, "empty Name"},
		{"duplicate model", testsuite.Options{Models: append(model(testsuite.OpenAI, testsuite.Limits{}), model(testsuite.OpenAI, testsuite.Limits{})...)}, "listed twice"},
		{"openai with ITPM", testsuite.Options{Models: model(testsuite.OpenAI, testsuite.Limits{InputTokensPerMinute: 5})}, "set TokensPerMinute"},
		{"anthropic with TPM", testsuite.Options{Models: model(testsuite.Anthropic, testsuite.Limits{TokensPerMinute: 5})}, "set Input/OutputTokensPerMinute"},
		{"negative limit", testsuite.Options{Models: model(testsuite.OpenAI, testsuite.Limits{RequestsPerDay: -1})}, "requests_per_day is negative"},
		{"negative concurrency", testsuite.Options{Models: model(testsuite.OpenAI, testsuite.Limits{MaxConcurrent: -1})}, "MaxConcurrent is negative"},
		{"burst window too long", testsuite.Options{Models: model(testsuite.OpenAI, testsuite.Limits{BurstWindow: time.Hour})}, "outside (0, 1m]"},
		{"negative context", testsuite.Options{Models: []testsuite.Model{{Name: "m", Provider: testsuite.OpenAI, ContextWindow: -1}}}, "negative ContextWindow"},
		{"empty key", testsuite.Options{Keys: []string{""}}, "empty API key"},
		{"negative body limit", testsuite.Options{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{"fault share over 1", testsuite.Options{Faults: testsuite.Faults{ConnReset: 1.5}}, "Faults.ConnReset"},
		{"fault share NaN", testsuite.Options{Faults: testsuite.Faults{Slow: nan()}}, "Faults.Slow"},
		{"early faults over 1", testsuite.Options{Faults: testsuite.Faults{Overloaded: 0.6, RateLimited: 0.6}}, "exceeds 1"},
		{"unknown headers time", testsuite.Options{HeadersAt: 7}, "HeadersAt"},
		{"negative slow latency", testsuite.Options{Faults: testsuite.Faults{SlowLatency: -time.Second}}, "SlowLatency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp, err := testsuite.New(tt.opts)
			require.Nil(t, fp)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}

func TestSettersRejectInvalidInput(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{}, testsuite.Limits{})
	require.ErrorIs(t, fp.SetLimits("nope", testsuite.Limits{}), testsuite.ErrUnknownModel)
	require.ErrorContains(t, fp.SetLimits(gpt, testsuite.Limits{OutputTokensPerMinute: 1}), "set TokensPerMinute")
	require.ErrorIs(t, fp.SetScopeLimits(testsuite.Scope{Model: "nope"}, testsuite.Limits{}), testsuite.ErrUnknownModel)
	require.ErrorContains(t, fp.SetFaults(testsuite.Faults{Overloaded: -1}), "Faults.Overloaded")
	_, err := fp.Limits(testsuite.Scope{Model: "nope"})
	require.ErrorIs(t, err, testsuite.ErrUnknownModel)
}

func TestDefaultsServeBothProviders(t *testing.T) {
	fp, err := testsuite.New(testsuite.Options{})
	require.NoError(t, err)
	defer fp.Close()
	c := openaiClient(fp)
	out, err := c.Chat.Completions.New(t.Context(), chatParams(testsuite.DefaultOpenAIModel))
	require.NoError(t, err)
	require.Equal(t, testsuite.DefaultOpenAIModel, out.Model)
	require.Empty(t, fp.Entries()[0].Remaining, "no limits, no budget reported")

	// A base URL without /v1 makes the SDK post to /chat/completions.
	bare := openai.NewClient(option.WithBaseURL(fp.URL()), option.WithAPIKey(testsuite.DefaultKey), option.WithMaxRetries(0))
	_, err = bare.Chat.Completions.New(t.Context(), chatParams(testsuite.DefaultOpenAIModel))
	require.NoError(t, err)

	a := anthropicClient(fp)
	msg, err := a.Messages.New(t.Context(), anthropic.MessageNewParams{Model: testsuite.DefaultAnthropicModel, MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	require.NoError(t, err)
	require.Equal(t, anthropic.Model(testsuite.DefaultAnthropicModel), msg.Model)
	fp.Close()
	fp.Close() // idempotent
}

func TestScopeLimitsArePerKey(t *testing.T) {
	fp, _ := start(t, testsuite.Limits{RequestsPerMinute: 1}, testsuite.Limits{},
		func(o *testsuite.Options) { o.Keys = []string{"key-a", "key-b"} })
	a, b := testsuite.Scope{Key: "key-a", Model: gpt}, testsuite.Scope{Key: "key-b", Model: gpt}
	require.NoError(t, fp.SetScopeLimits(b, testsuite.Limits{RequestsPerMinute: 2}))
	for _, s := range []testsuite.Scope{a, b, b} {
		e, err := fp.Spend(s, testsuite.Demand{InputTokens: 1})
		require.NoError(t, err)
		require.Equal(t, 200, e.Status, s.String())
	}
	e, err := fp.Spend(a, testsuite.Demand{InputTokens: 1})
	require.NoError(t, err)
	require.Equal(t, testsuite.CauseRequests, e.Cause)
	require.Len(t, fp.ScopeEntries(b), 2)
	fp.ResetRecord()
	require.Empty(t, fp.Entries())
}
