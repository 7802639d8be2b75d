package spend_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/spend"
)

var testPrices = spend.Prices{
	"openai/gpt-4o":               {Input: 2.5, CachedInput: 1.25, Output: 10},
	"openai/gpt-4o-2024-05-13":    {Input: 5, Output: 15},
	"anthropic/claude-sonnet-4-5": {Input: 3, CachedInput: 0.3, Output: 15, CacheWrite: 3.75},
	"gemini/gemini-2.5-flash":     {Input: 0.3, CachedInput: 0.075, Output: 2.5},
	"openai/gpt-4o-mini":          {Input: 0.15, CachedInput: 0.075, Output: 0.6},
	"openai/free-model":           {},
}

func TestPriceCost(t *testing.T) {
	for _, tt := range []struct {
		name         string
		provider     capacity.Provider
		model, group string
		u            capacity.Usage
		want         float64
		priced       bool
	}{
		{"input and output", capacity.OpenAI, "gpt-4o", "gpt-4o", capacity.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, 2.5 + 1, true},
		{"cached input at its price", capacity.OpenAI, "gpt-4o", "gpt-4o", capacity.Usage{InputTokens: 200_000, CacheReadInputTokens: 800_000}, 0.5 + 1, true},
		{"a snapshot by its limit group", capacity.OpenAI, "gpt-4o-2024-08-06", "gpt-4o", capacity.Usage{OutputTokens: 1_000_000}, 10, true},
		{"a snapshot with its own price", capacity.OpenAI, "gpt-4o-2024-05-13", "gpt-4o", capacity.Usage{OutputTokens: 1_000_000}, 15, true},
		{"cache writes at CacheWrite", capacity.Anthropic, "claude-sonnet-4-5", "claude-sonnet-4-5",
			capacity.Usage{InputTokens: 1000, CacheCreationInputTokens: 1000, CacheReadInputTokens: 10_000, OutputTokens: 100}, (3000 + 3750 + 3000 + 1500) / 1e6, true},
		{"cache writes at Input without CacheWrite", capacity.OpenAI, "gpt-4o", "gpt-4o", capacity.Usage{CacheCreationInputTokens: 1_000_000}, 2.5, true},
		{"reasoning counts as output", capacity.Gemini, "gemini-2.5-flash", "gemini-2.5-flash", capacity.Usage{OutputTokens: 600_000, ExtraReasoningTokens: 400_000}, 2.5, true},
		{"a free model is priced", capacity.OpenAI, "free-model", "free-model", capacity.Usage{InputTokens: 5}, 0, true},
		{"an unknown model", capacity.OpenAI, "o3", "o3", capacity.Usage{InputTokens: 5}, 0, false},
		{"the same model on another provider", capacity.Anthropic, "gpt-4o", "gpt-4o", capacity.Usage{InputTokens: 5}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := testPrices.Lookup(tt.provider, tt.model, tt.group)
			require.Equal(t, tt.priced, ok)
			assert.InDelta(t, tt.want, p.Cost(tt.u), 1e-12)
		})
	}
}

func TestPriceWorstCase(t *testing.T) {
	p := testPrices["openai/gpt-4o"]
	for _, tt := range []struct {
		name string
		d    capacity.Demand
		want float64
	}{
		{"prompt and max_tokens", capacity.Demand{InputTokens: 1_000_000, MaxTokens: 100_000}, 2.5 + 1},
		{"cached estimate at its price", capacity.Demand{InputTokens: 0, CachedInputTokens: 1_000_000}, 1.25},
		{"OutputTokens when larger", capacity.Demand{OutputTokens: 200_000, MaxTokens: 100_000}, 2},
		{"max_tokens when larger", capacity.Demand{OutputTokens: 1000, MaxTokens: 100_000}, 1},
		{"no output bound: no output", capacity.Demand{InputTokens: 1_000_000}, 2.5},
		{"negative figures count as zero", capacity.Demand{InputTokens: -5, MaxTokens: -5}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.InDelta(t, tt.want, p.WorstCase(tt.d), 1e-12)
		})
	}
}

func TestPricesValidate(t *testing.T) {
	require.NoError(t, testPrices.Validate())
	require.NoError(t, spend.Prices(nil).Validate())
	for name, p := range map[string]spend.Prices{
		"no provider":    {"gpt-4o": {Input: 1}},
		"empty model":    {"openai/": {Input: 1}},
		"negative":       {"openai/gpt-4o": {Output: -1}},
		"NaN":            {"openai/gpt-4o": {Input: math.NaN()}},
		"infinite write": {"openai/gpt-4o": {CacheWrite: math.Inf(1)}},
	} {
		assert.ErrorIs(t, p.Validate(), spend.ErrInvalidPrices, name)
	}
	assert.Equal(t, "openai/gpt-4o", spend.PriceKey(capacity.OpenAI, "gpt-4o"))
}
