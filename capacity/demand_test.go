package capacity_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/tollgate-dev/tollgate/capacity"
	"github.com/tollgate-dev/tollgate/capacity/accounting"
)

// profiles is every accounting profile tollgate ships, with both OpenAI
// token rules.
var profiles = []accounting.Profile{
	accounting.OpenAIProfile{},
	accounting.OpenAIProfile{TokenRule: accounting.MaxOfMaxTokensAndEstimate},
	accounting.AnthropicProfile{},
	accounting.GeminiProfile{},
}

func TestDemandValidate(t *testing.T) {
	tests := []struct {
		name string
		d    capacity.Demand
		ok   bool
	}{
		{"zero", capacity.Demand{}, true},
		{"typical", capacity.Demand{InputTokens: 1200, CachedInputTokens: 800, MaxTokens: 512}, true},
		{"every field at the maximum", capacity.Demand{Requests: capacity.MaxDemand, InputTokens: capacity.MaxDemand,
			CachedInputTokens: capacity.MaxDemand, OutputTokens: capacity.MaxDemand, MaxTokens: capacity.MaxDemand}, true},
		{"negative input cancelled by cached input", capacity.Demand{InputTokens: -5000, CachedInputTokens: 5000, MaxTokens: 100}, false},
		{"negative cached input", capacity.Demand{InputTokens: 100, CachedInputTokens: -1}, false},
		{"negative output", capacity.Demand{OutputTokens: -1, MaxTokens: 100}, false},
		{"negative max tokens", capacity.Demand{MaxTokens: -100}, false},
		{"negative requests", capacity.Demand{Requests: -1}, false},
		{"input past the maximum", capacity.Demand{InputTokens: capacity.MaxDemand + 1}, false},
		{"fields whose sum overflows", capacity.Demand{InputTokens: math.MaxInt64, CachedInputTokens: math.MaxInt64, MaxTokens: 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.d.Validate()
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, capacity.ErrInvalidDemand)
			require.ErrorIs(t, err, capacity.ErrInvalidRequest, "an invalid demand is an invalid request")
		})
	}
}

// drawDemandField draws a Demand field: usually valid, sometimes negative,
// sometimes past MaxDemand up to math.MaxInt64, where a profile's sums
// would overflow.
func drawDemandField(t *rapid.T, name string) int64 {
	switch rapid.IntRange(0, 5).Draw(t, name+"-kind") {
	case 0:
		return rapid.Int64Range(math.MinInt64, -1).Draw(t, name)
	case 1:
		return rapid.Int64Range(capacity.MaxDemand+1, math.MaxInt64).Draw(t, name)
	}
	return rapid.Int64Range(0, capacity.MaxDemand).Draw(t, name)
}

// TestPropertyDemandIsValidBeforeItIsCharged checks that Validate refuses
// exactly the demands with a field out of range, and that every profile
// charges a valid demand at least one request and never a negative or
// wrapped-around amount.
func TestPropertyDemandIsValidBeforeItIsCharged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := capacity.Demand{
			Requests:          drawDemandField(t, "requests"),
			InputTokens:       drawDemandField(t, "input"),
			CachedInputTokens: drawDemandField(t, "cached"),
			OutputTokens:      drawDemandField(t, "output"),
			MaxTokens:         drawDemandField(t, "max-tokens"),
		}
		outOfRange := false
		for _, v := range []int64{d.Requests, d.InputTokens, d.CachedInputTokens, d.OutputTokens, d.MaxTokens} {
			outOfRange = outOfRange || v < 0 || v > capacity.MaxDemand
		}
		err := d.Validate()
		if outOfRange {
			require.ErrorIs(t, err, capacity.ErrInvalidDemand)
			return
		}
		require.NoError(t, err)
		for _, p := range profiles {
			c := p.Charges(d)
			for dim, v := range c {
				require.GreaterOrEqual(t, v, int64(0), "%s %s", p.Name(), capacity.Dimension(dim))
			}
			require.GreaterOrEqual(t, c[capacity.Requests], int64(1), p.Name())
			require.GreaterOrEqual(t, c[capacity.Tokens], d.InputTokens, "%s: combined tokens count the input", p.Name())
		}
	})
}
